# German translation of en.ftl, the verification page's own text.
# Review: machine-written. A native speaker's review raised the success of a
# check ("Geprüft.") and the tone of an error ("Etwas ist schiefgelaufen"),
# and the retry message that joined two sentences ("{reason} Still
# trying…"); those were reworded here, and the rewording has not yet been
# checked by a native speaker. Nothing else in this file has been reviewed
# by a native speaker. Corrections are welcome.
# Keep the message ids and the placeables such as { $status } as they are.

## Über die Sprache selbst

# The language's own name for itself, as the language switch lists it.
language-name = Deutsch
# The direction the language is written in: ltr or rtl.
language-direction = ltr
# The language switch's label, for screen readers.
language-switch = Sprache

## Die Seite

page-title = Nachweis prüfen
intro = Teilen Sie einen Nachweis aus Ihrer Wallet. Sie entscheiden, was geteilt wird, und Sie können ablehnen.
# { $asker } is the name of the site or application that asks.
asker = { $asker } bittet Sie, einen Nachweis prüfen zu lassen. Danach kehren Sie dorthin zurück.
purpose-title = Warum danach gefragt wird
start = Mit meiner Wallet prüfen
present-title = Öffnen Sie Ihre Wallet
wallet-button = Meine Wallet öffnen
show-qr = Meine Wallet ist auf einem anderen Gerät: QR-Code anzeigen
hide-qr = QR-Code ausblenden
scan-qr = Scannen Sie diesen Code mit Ihrer Wallet-App.
# { $site } is the host of the site that asks, as its address names it.
qr-site = Scannen Sie ihn nur, wenn Sie die Anmeldung bei { $site } selbst begonnen haben.
qr-label = QR-Code zum Scannen mit Ihrer Wallet
same-device = Meine Wallet ist auf diesem Gerät
result-title = Vorgelegte Angaben
restart = Neu beginnen
logo-alt = { $name }

## Was die Seite während der Arbeit anzeigt

starting = Wird gestartet…
waiting-mobile = Öffnen Sie Ihre Wallet, um fortzufahren. Warten auf Ihre Wallet…
waiting-desktop = Scannen Sie den QR-Code mit Ihrer Wallet. Warten auf Ihre Wallet…
unreachable-retrying = Diese Website ist gerade nicht erreichbar; wir versuchen es weiter…
busy-retrying = Diese Website ist gerade ausgelastet. Wir versuchen es weiter…
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $code ->
    [upstream_timeout] Der Prüfdienst antwortet gerade langsam; wir versuchen es weiter…
    [upstream_unreachable] Diese Website erreicht den Prüfdienst gerade nicht; wir versuchen es weiter…
    [token_unavailable] Diese Website erreicht den Prüfdienst gerade nicht; wir versuchen es weiter…
    [too_many_sessions] Diese Website bearbeitet gerade sehr viele Prüfungen; wir versuchen es weiter…
    [too_many_connections] Diese Website hat gerade sehr viele Besucher; wir versuchen es weiter…
    [rate_limited] Von hier aus wurden gerade viele Prüfungen gestartet; wir versuchen es weiter…
   *[other] Beim Prüfdienst besteht gerade ein Problem; wir versuchen es weiter…
}
unreachable-start = Diese Website ist gerade nicht erreichbar. Prüfen Sie Ihre Verbindung und beginnen Sie neu.
unreadable = Diese Website hat eine Antwort gegeben, die diese Seite nicht lesen kann. Bitte beginnen Sie neu.
# { $status } is an HTTP status code, such as 500.
http-error = Es ist ein Fehler aufgetreten (HTTP { $status }). Bitte beginnen Sie neu.
session-unknown = Diese Sitzung ist hier nicht mehr bekannt. Bitte beginnen Sie neu.

## Wie eine Sitzung endet

verified = Erfolgreich geprüft. Ihre Wallet hat die folgenden Angaben vorgelegt.
declined = Sie haben abgelehnt, einen Nachweis zu teilen. Es wurde nichts geteilt.
expired = Die Sitzung ist abgelaufen, bevor ein Nachweis vorgelegt wurde.
failed = Die Prüfung ist fehlgeschlagen. Bitte beginnen Sie neu.
failed-claims-unusable = Ihre Wallet hat einen Nachweis vorgelegt, aber diese Website kann seine Angaben nicht anzeigen (sie sind zu groß oder nicht in der erwarteten Form). Es wurde nichts gespeichert. Bitte beginnen Sie neu oder wenden Sie sich an den Betreiber der Website.
failed-answer-unreadable = Der Prüfdienst hat eine Antwort gegeben, die diese Website nicht lesen kann. Bitte beginnen Sie neu oder wenden Sie sich an den Betreiber der Website.
return-verified = Erfolgreich geprüft. Sie werden zur anfragenden Website zurückgeleitet…
return-declined = Sie haben abgelehnt, einen Nachweis zu teilen. Sie werden zur anfragenden Website zurückgeleitet…
return-expired = Die Sitzung ist abgelaufen. Sie werden zur anfragenden Website zurückgeleitet…
return-failed = Die Prüfung ist fehlgeschlagen. Sie werden zur anfragenden Website zurückgeleitet…

## Fehler, die lanyard meldet, nach ihrem Code

error-rate_limited = Von hier aus wurden gerade zu viele Prüfungen gestartet. Bitte warten Sie einen Moment und beginnen Sie dann neu.
error-too_many_sessions = Diese Website bearbeitet gerade zu viele Prüfungen. Bitte versuchen Sie es in einigen Minuten erneut.
error-token_unavailable = Diese Website kann den Prüfdienst gerade nicht erreichen. Bitte versuchen Sie es später erneut.
error-service_refused = Der Prüfdienst hat diese Website abgewiesen. Der Betreiber der Website wurde informiert.
error-rule_not_found = Der Prüfdienst weiß nicht, was diese Website anfragt. Der Betreiber der Website wurde informiert.
error-service_error = Beim Prüfdienst ist ein Problem aufgetreten. Bitte versuchen Sie es gleich noch einmal.
error-upstream_unreachable = Diese Website konnte den Prüfdienst nicht erreichen. Bitte versuchen Sie es gleich noch einmal.
error-upstream_timeout = Der Prüfdienst hat nicht rechtzeitig geantwortet. Bitte versuchen Sie es gleich noch einmal.
error-bad_request = Diese Anfrage kann nicht bearbeitet werden. Kehren Sie dorthin zurück, woher Sie gekommen sind, und beginnen Sie neu.
error-not_found = Diese Website kennt nicht, was diese Seite angefragt hat. Bitte beginnen Sie neu.
error-method_not_allowed = Diese Website nimmt diese Art von Anfrage nicht an. Bitte beginnen Sie neu.
error-payload_too_large = Diese Seite hat der Website mehr gesendet, als sie annimmt. Bitte beginnen Sie neu.
error-unsupported_media_type = Diese Seite hat der Website eine Anfrage in einer Form gesendet, die sie nicht annimmt. Bitte beginnen Sie neu.
error-cross_site_request = Diese Website nimmt nur Anfragen von ihren eigenen Seiten an. Öffnen Sie sie direkt und beginnen Sie neu.
error-too_many_connections = Diese Website hat gerade zu viele Besucher. Bitte versuchen Sie es in einigen Minuten erneut.
error-uri_too_long = Die Adresse dieser Seite ist für diese Website zu lang. Kehren Sie dorthin zurück, woher Sie gekommen sind, und beginnen Sie neu.

## Wie Angaben angezeigt werden

value-true = Ja
value-false = Nein
control-character = Ein Steuerzeichen, angezeigt als sein Codepunkt
nested-too-deep = (zu tief verschachtelt für die Anzeige)
empty-list = (leere Liste)
empty-object = (leeres Objekt)

## lanyard's own pages: a login it cannot go on with, and a path with no page

refused-title = Diese Anmeldung kann nicht fortgesetzt werden
refused-advice = Kehren Sie zu der Website zurück, von der Sie kamen, und beginnen Sie neu. Wenn das erneut geschieht, informieren Sie deren Betreiber.
refused-repeated = Die Anfrage nennt ihre Anwendung oder ihre Rückkehradresse mehr als einmal.
refused-client-missing = Die Anfrage nennt nicht die Anwendung, die anfragt.
refused-client-unknown = Die Anwendung, die Sie hierher geschickt hat, ist diesem Dienst nicht bekannt.
refused-redirect-missing = Die Anfrage nennt nicht, wohin die Rückkehr erfolgen soll.
refused-redirect-unregistered = Die Adresse, zu der die Anfrage zurückkehren will, ist für diese Anwendung nicht registriert.
refused-stale = Diese Anmeldung ist abgelaufen oder hier nicht gültig.
refused-unavailable = Dieser Dienst kann gerade keine Anmeldung beginnen. Bitte versuchen Sie es erneut.
not-found-title = Seite nicht gefunden
not-found = Unter dieser Adresse gibt es keine Seite. Prüfen Sie die Adresse oder kehren Sie zu der Website zurück, von der Sie kamen.

## Claims' labels, by the claim's key; a brand's own label for a claim wins

claim-sub = Kennung
claim-name = Vollständiger Name
claim-given_name = Vorname
claim-family_name = Nachname
claim-middle_name = Zweiter Vorname
claim-nickname = Spitzname
claim-preferred_username = Bevorzugter Benutzername
claim-profile = Profilseite
claim-picture = Bild
claim-website = Website
claim-email = E-Mail-Adresse
claim-email_address = E-Mail-Adresse
claim-email_verified = E-Mail-Adresse bestätigt
claim-gender = Geschlecht
claim-sex = Geschlecht
claim-birthdate = Geburtsdatum
claim-birth_date = Geburtsdatum
claim-age_in_years = Alter
claim-age_birth_year = Geburtsjahr
claim-zoneinfo = Zeitzone
claim-locale = Sprache und Region
claim-phone_number = Telefonnummer
claim-mobile_phone_number = Mobilfunknummer
claim-phone_number_verified = Telefonnummer bestätigt
claim-address = Anschrift
claim-address-formatted = Vollständige Anschrift
claim-address-street_address = Straße und Hausnummer
claim-address-locality = Ort
claim-address-region = Region
claim-address-postal_code = Postleitzahl
claim-address-country = Land
claim-resident_address = Anschrift
claim-resident_street = Straße
claim-resident_house_number = Hausnummer
claim-resident_postal_code = Postleitzahl
claim-resident_city = Ort
claim-resident_state = Bundesland oder Region
claim-resident_country = Wohnsitzland
claim-updated_at = Zuletzt aktualisiert
claim-nationality = Staatsangehörigkeit
claim-birth_place = Geburtsort
claim-place_of_birth = Geburtsort
claim-birth_country = Geburtsland
claim-birth_city = Geburtsstadt
claim-family_name_birth = Geburtsname
claim-given_name_birth = Vorname bei Geburt
claim-document_number = Dokumentnummer
claim-issuing_country = Ausstellungsstaat
claim-issuing_authority = Ausstellende Behörde
claim-issuance_date = Ausstellungsdatum
claim-issue_date = Ausstellungsdatum
claim-expiry_date = Ablaufdatum
claim-portrait = Lichtbild
claim-age_over = { $age ->
    [one] Mindestens { $age } Jahr alt
   *[other] Mindestens { $age } Jahre alt
}
