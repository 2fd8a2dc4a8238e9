# Italian translation of en.ftl, the verification page's own text.
# No native speaker has reviewed it yet: corrections are welcome.
# Keep the message ids and the placeables such as { $status } as they are.

## Sulla lingua stessa

# The language's own name for itself, as the language switch lists it.
language-name = Italiano
# The direction the language is written in: ltr or rtl.
language-direction = ltr
# The language switch's label, for screen readers.
language-switch = Lingua

## La pagina

page-title = Verifica di una credenziale
intro = Condivida una credenziale dal suo portafoglio. Decide lei cosa condividere e può rifiutare.
# { $asker } is the name of the site or application that asks.
asker = { $asker } le chiede di verificare una credenziale. Al termine tornerà lì.
purpose-title = Perché viene chiesto
start = Verifica con il mio portafoglio
present-title = Apra il suo portafoglio
wallet-button = Apri il mio portafoglio
show-qr = Il mio portafoglio è su un altro dispositivo: mostra un codice QR
hide-qr = Nascondi il codice QR
scan-qr = Scansioni questo codice con l’app del suo portafoglio.
# { $site } is the host of the site that asks, as its address names it.
qr-site = Lo scansioni solo se ha avviato lei stesso l’accesso a { $site }.
qr-label = Codice QR da scansionare con il suo portafoglio
same-device = Il mio portafoglio è su questo dispositivo
result-title = Dati presentati
restart = Ricomincia
logo-alt = { $name }

## Cosa dice la pagina mentre lavora

starting = Avvio in corso…
waiting-mobile = Apra il suo portafoglio per continuare. In attesa del portafoglio…
waiting-desktop = Scansioni il codice QR con il suo portafoglio. In attesa del portafoglio…
unreachable-retrying = Al momento non è possibile raggiungere questo sito; nuovo tentativo in corso…
busy-retrying = Al momento questo sito è occupato. Nuovo tentativo in corso…
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $reason } Nuovo tentativo in corso…
unreachable-start = Al momento non è possibile raggiungere questo sito. Controlli la connessione e ricominci.
unreadable = Questo sito ha dato una risposta che questa pagina non riesce a leggere. Per favore, ricominci.
# { $status } is an HTTP status code, such as 500.
http-error = Si è verificato un problema (HTTP { $status }). Per favore, ricominci.
session-unknown = Questa sessione non è più riconosciuta qui. Per favore, ricominci.

## Come termina una sessione

verified = Verificato. Il suo portafoglio ha presentato i dati qui sotto.
declined = Ha rifiutato di condividere una credenziale. Non è stato condiviso nulla.
expired = La sessione è scaduta prima che venisse presentata una credenziale.
failed = La verifica non è riuscita. Per favore, ricominci.
failed-claims-unusable = Il suo portafoglio ha presentato una credenziale, ma questo sito non può mostrarne i dati (sono troppo grandi o non nel formato previsto). Non è stato conservato nulla. Per favore, ricominci o si rivolga al gestore del sito.
failed-answer-unreadable = Il servizio di verifica ha dato una risposta che questo sito non riesce a leggere. Per favore, ricominci o si rivolga al gestore del sito.
return-verified = Verificato. Ritorno al sito che ha fatto la richiesta…
return-declined = Ha rifiutato di condividere una credenziale. Ritorno al sito che ha fatto la richiesta…
return-expired = La sessione è scaduta. Ritorno al sito che ha fatto la richiesta…
return-failed = La verifica non è riuscita. Ritorno al sito che ha fatto la richiesta…

## Errori restituiti da lanyard, in base al codice

error-rate_limited = Sono state avviate troppe verifiche da qui in poco tempo. Attenda un momento e ricominci.
error-too_many_sessions = Al momento questo sito sta gestendo troppe verifiche. Riprovi tra qualche minuto.
error-token_unavailable = Al momento questo sito non riesce a raggiungere il servizio di verifica. Riprovi più tardi.
error-service_refused = Il servizio di verifica ha rifiutato questo sito. Il gestore del sito è stato avvisato.
error-rule_not_found = Il servizio di verifica non sa che cosa chiede questo sito. Il gestore del sito è stato avvisato.
error-service_error = Il servizio di verifica ha avuto un problema. Riprovi tra un momento.
error-upstream_unreachable = Questo sito non è riuscito a raggiungere il servizio di verifica. Riprovi tra un momento.
error-upstream_timeout = Il servizio di verifica non ha risposto in tempo. Riprovi tra un momento.
error-bad_request = Questa richiesta non può essere gestita. Torni alla pagina da cui proviene e ricominci.

## Come vengono mostrati i dati

value-true = Sì
value-false = No
control-character = Un carattere di controllo, mostrato con il suo punto di codice
nested-too-deep = (annidato troppo in profondità per essere mostrato)
empty-list = (elenco vuoto)
empty-object = (oggetto vuoto)
