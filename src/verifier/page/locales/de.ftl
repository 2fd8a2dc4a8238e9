# German translation of en.ftl, the verification page's own text.
# No native speaker has reviewed it yet: corrections are welcome.
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
retrying = { $reason } Wir versuchen es weiter…
unreachable-start = Diese Website ist gerade nicht erreichbar. Prüfen Sie Ihre Verbindung und beginnen Sie neu.
unreadable = Diese Website hat eine Antwort gegeben, die diese Seite nicht lesen kann. Bitte beginnen Sie neu.
# { $status } is an HTTP status code, such as 500.
http-error = Etwas ist schiefgelaufen (HTTP { $status }). Bitte beginnen Sie neu.
session-unknown = Diese Sitzung ist hier nicht mehr bekannt. Bitte beginnen Sie neu.

## Wie eine Sitzung endet

verified = Geprüft. Ihre Wallet hat die folgenden Angaben vorgelegt.
declined = Sie haben abgelehnt, einen Nachweis zu teilen. Es wurde nichts geteilt.
expired = Die Sitzung ist abgelaufen, bevor ein Nachweis vorgelegt wurde.
failed = Die Prüfung ist fehlgeschlagen. Bitte beginnen Sie neu.
failed-claims-unusable = Ihre Wallet hat einen Nachweis vorgelegt, aber diese Website kann seine Angaben nicht anzeigen (sie sind zu groß oder nicht in der erwarteten Form). Es wurde nichts gespeichert. Bitte beginnen Sie neu oder wenden Sie sich an den Betreiber der Website.
failed-answer-unreadable = Der Prüfdienst hat eine Antwort gegeben, die diese Website nicht lesen kann. Bitte beginnen Sie neu oder wenden Sie sich an den Betreiber der Website.
return-verified = Geprüft. Sie werden zur anfragenden Website zurückgeleitet…
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

## Wie Angaben angezeigt werden

value-true = Ja
value-false = Nein
control-character = Ein Steuerzeichen, angezeigt als sein Codepunkt
nested-too-deep = (zu tief verschachtelt für die Anzeige)
empty-list = (leere Liste)
empty-object = (leeres Objekt)
