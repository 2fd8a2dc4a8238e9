# French translation of en.ftl, the verification page's own text.
# No native speaker has reviewed it yet: corrections are welcome.
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
busy-retrying = Ce site est occupé pour le moment. Nouvelle tentative en cours…
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $reason } Nouvelle tentative en cours…
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

## Affichage des données

value-true = Oui
value-false = Non
control-character = Un caractère de contrôle, affiché par son point de code
nested-too-deep = (imbrication trop profonde pour être affichée)
empty-list = (liste vide)
empty-object = (objet vide)
