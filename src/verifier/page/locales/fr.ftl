# French translation of en.ftl, the verification page's own text.
# Review: machine-written. A native speaker's review raised the word for an
# overloaded site ("occupé"), and the retry message that joined two
# sentences ("{reason} Still trying…"); those were reworded here, and the
# rewording has not yet been checked by a native speaker. Nothing else in
# this file has been reviewed by a native speaker. Corrections are welcome.
# Keep the message ids and the placeables such as { $status } as they are.
# Before ":" this file uses a no-break space (U+00A0), and before ";" a
# narrow no-break space (U+202F), as French typography asks.

## À propos de la langue elle-même

# The language's own name for itself, as the language switch lists it.
language-name = Français
# The direction the language is written in: ltr or rtl.
language-direction = ltr
# The language switch's label, for screen readers.
language-switch = Langue

## La page

page-title = Vérifier une attestation
intro = Partagez une attestation depuis votre portefeuille. Vous choisissez ce qui est partagé et vous pouvez refuser.
# { $asker } is the name of the site or application that asks.
asker = { $asker } vous demande de faire vérifier une attestation. Vous y reviendrez ensuite.
purpose-title = Pourquoi cette demande
start = Vérifier avec mon portefeuille
present-title = Ouvrez votre portefeuille
wallet-button = Ouvrir mon portefeuille
show-qr = Mon portefeuille est sur un autre appareil : afficher un code QR
hide-qr = Masquer le code QR
scan-qr = Scannez ce code avec l’application de votre portefeuille.
# { $site } is the host of the site that asks, as its address names it.
qr-site = Ne le scannez que si vous avez vous-même commencé à vous connecter à { $site }.
qr-label = Code QR à scanner avec votre portefeuille
same-device = Mon portefeuille est sur cet appareil
result-title = Données présentées
restart = Recommencer
logo-alt = { $name }

## Ce que la page affiche pendant son travail

starting = Démarrage…
waiting-mobile = Ouvrez votre portefeuille pour continuer. En attente de votre portefeuille…
waiting-desktop = Scannez le code QR avec votre portefeuille. En attente de votre portefeuille…
unreachable-retrying = Impossible de joindre ce site pour le moment ; nouvelle tentative en cours…
busy-retrying = Ce site est surchargé pour le moment. Nouvelle tentative en cours…
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $code ->
    [upstream_timeout] Le service de vérification tarde à répondre ; nouvelle tentative en cours…
    [upstream_unreachable] Ce site ne parvient pas à joindre le service de vérification pour le moment ; nouvelle tentative en cours…
    [token_unavailable] Ce site ne parvient pas à joindre le service de vérification pour le moment ; nouvelle tentative en cours…
    [too_many_sessions] Ce site traite de nombreuses vérifications en ce moment ; nouvelle tentative en cours…
    [too_many_connections] Ce site reçoit de nombreux visiteurs en ce moment ; nouvelle tentative en cours…
    [rate_limited] De nombreuses vérifications viennent d’être lancées depuis cet endroit ; nouvelle tentative en cours…
   *[other] Le service de vérification rencontre un problème ; nouvelle tentative en cours…
}
unreachable-start = Impossible de joindre ce site pour le moment. Vérifiez votre connexion et recommencez.
unreadable = Ce site a donné une réponse que cette page ne peut pas lire. Veuillez recommencer.
# { $status } is an HTTP status code, such as 500.
http-error = Une erreur s’est produite (HTTP { $status }). Veuillez recommencer.
session-unknown = Cette session n’est plus connue ici. Veuillez recommencer.

## Comment une session se termine

verified = Vérifié. Votre portefeuille a présenté les données ci-dessous.
declined = Vous avez refusé de partager une attestation. Rien n’a été partagé.
expired = La session a expiré avant qu’une attestation soit présentée.
failed = La vérification a échoué. Veuillez recommencer.
failed-claims-unusable = Votre portefeuille a présenté une attestation, mais ce site ne peut pas en afficher les données (elles sont trop volumineuses ou n’ont pas la forme attendue). Rien n’a été conservé. Veuillez recommencer ou contacter l’exploitant du site.
failed-answer-unreadable = Le service de vérification a donné une réponse que ce site ne peut pas lire. Veuillez recommencer ou contacter l’exploitant du site.
return-verified = Vérifié. Retour au site qui a fait la demande…
return-declined = Vous avez refusé de partager une attestation. Retour au site qui a fait la demande…
return-expired = La session a expiré. Retour au site qui a fait la demande…
return-failed = La vérification a échoué. Retour au site qui a fait la demande…

## Erreurs renvoyées par lanyard, selon leur code

error-rate_limited = Trop de vérifications viennent d’être lancées depuis cet endroit. Veuillez patienter un instant, puis recommencer.
error-too_many_sessions = Ce site traite trop de vérifications en ce moment. Veuillez réessayer dans quelques minutes.
error-token_unavailable = Ce site ne peut pas joindre le service de vérification pour le moment. Veuillez réessayer plus tard.
error-service_refused = Le service de vérification a refusé ce site. L’exploitant du site en a été informé.
error-rule_not_found = Le service de vérification ne sait pas ce que ce site demande. L’exploitant du site en a été informé.
error-service_error = Le service de vérification a rencontré un problème. Veuillez réessayer dans un instant.
error-upstream_unreachable = Ce site n’a pas pu joindre le service de vérification. Veuillez réessayer dans un instant.
error-upstream_timeout = Le service de vérification n’a pas répondu à temps. Veuillez réessayer dans un instant.
error-bad_request = Cette demande ne peut pas être traitée. Revenez à la page d’où vous venez et recommencez.
error-not_found = Ce site ne connaît pas ce que cette page a demandé. Veuillez recommencer.
error-method_not_allowed = Ce site n’accepte pas ce type de demande. Veuillez recommencer.
error-payload_too_large = Cette page a envoyé à ce site plus qu’il n’accepte. Veuillez recommencer.
error-unsupported_media_type = Cette page a envoyé à ce site une demande sous une forme qu’il n’accepte pas. Veuillez recommencer.
error-cross_site_request = Ce site n’accepte que les demandes de ses propres pages. Ouvrez-le directement et recommencez.
error-too_many_connections = Ce site reçoit trop de visiteurs en ce moment. Veuillez réessayer dans quelques minutes.
error-uri_too_long = L’adresse de cette page est trop longue pour ce site. Revenez à la page d’où vous venez et recommencez.

## Affichage des données

value-true = Oui
value-false = Non
control-character = Un caractère de contrôle, affiché par son point de code
nested-too-deep = (imbrication trop profonde pour être affichée)
empty-list = (liste vide)
empty-object = (objet vide)

## lanyard's own pages: a login it cannot go on with, and a path with no page

refused-title = Cette connexion ne peut pas se poursuivre
refused-advice = Revenez au site d’où vous venez et recommencez. Si cela se reproduit, prévenez son exploitant.
refused-repeated = La demande indique son application ou son adresse de retour plus d’une fois.
refused-client-missing = La demande n’indique pas quelle application la fait.
refused-client-unknown = L’application qui vous a envoyé ici n’est pas connue de ce service.
refused-redirect-missing = La demande n’indique pas où revenir.
refused-redirect-unregistered = L’adresse de retour demandée n’est pas enregistrée pour cette application.
refused-stale = Cette connexion a expiré ou n’est pas valable ici.
refused-unavailable = Ce service ne peut pas commencer de connexion pour le moment. Veuillez réessayer.
not-found-title = Page introuvable
not-found = Il n’y a aucune page à cette adresse. Vérifiez l’adresse ou revenez au site d’où vous venez.

## Claims' labels, by the claim's key; a brand's own label for a claim wins

claim-sub = Identifiant
claim-name = Nom complet
claim-given_name = Prénom
claim-family_name = Nom de famille
claim-middle_name = Deuxième prénom
claim-nickname = Surnom
claim-preferred_username = Nom d’utilisateur préféré
claim-profile = Page de profil
claim-picture = Photo
claim-website = Site web
claim-email = Adresse e-mail
claim-email_address = Adresse e-mail
claim-email_verified = Adresse e-mail vérifiée
claim-gender = Genre
claim-sex = Sexe
claim-birthdate = Date de naissance
claim-birth_date = Date de naissance
claim-age_in_years = Âge
claim-age_birth_year = Année de naissance
claim-zoneinfo = Fuseau horaire
claim-locale = Langue et région
claim-phone_number = Numéro de téléphone
claim-mobile_phone_number = Numéro de mobile
claim-phone_number_verified = Numéro de téléphone vérifié
claim-address = Adresse
claim-address-formatted = Adresse complète
claim-address-street_address = Numéro et rue
claim-address-locality = Ville
claim-address-region = Région
claim-address-postal_code = Code postal
claim-address-country = Pays
claim-resident_address = Adresse
claim-resident_street = Rue
claim-resident_house_number = Numéro de rue
claim-resident_postal_code = Code postal
claim-resident_city = Ville
claim-resident_state = État ou région
claim-resident_country = Pays de résidence
claim-updated_at = Dernière mise à jour
claim-nationality = Nationalité
claim-birth_place = Lieu de naissance
claim-place_of_birth = Lieu de naissance
claim-birth_country = Pays de naissance
claim-birth_city = Ville de naissance
claim-family_name_birth = Nom de naissance
claim-given_name_birth = Prénom de naissance
claim-document_number = Numéro du document
claim-issuing_country = Pays de délivrance
claim-issuing_authority = Autorité de délivrance
claim-issuance_date = Date de délivrance
claim-issue_date = Date de délivrance
claim-expiry_date = Date d’expiration
claim-portrait = Photo d’identité
claim-age_over = { $age ->
    [one] Au moins { $age } an
   *[other] Au moins { $age } ans
}
