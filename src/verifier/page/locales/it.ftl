# Italian translation of en.ftl, the verification page's own text.
# Review: machine-written. A native speaker's review raised the word for a
# credential ("credenziale" reads as a login password, as in "credenziali
# SPID": now "documento digitale") and the word for an overloaded site
# ("occupato"), and the retry message that joined two sentences ("{reason}
# Still trying…"); those were reworded here, and the rewording has not yet
# been checked by a native speaker. Nothing else in this file has been
# reviewed by a native speaker. Corrections are welcome.
# Keep the message ids and the placeables such as { $status } as they are.

## Sulla lingua stessa

# The language's own name for itself, as the language switch lists it.
language-name = Italiano
# The direction the language is written in: ltr or rtl.
language-direction = ltr
# The language switch's label, for screen readers.
language-switch = Lingua

## La pagina

page-title = Verifica di un documento digitale
intro = Condivida un documento digitale dal suo portafoglio. Decide lei cosa condividere e può rifiutare.
# { $asker } is the name of the site or application that asks.
asker = { $asker } le chiede di verificare un documento digitale. Al termine tornerà lì.
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
busy-retrying = Al momento questo sito è sovraccarico. Nuovo tentativo in corso…
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $code ->
    [upstream_timeout] Il servizio di verifica è lento a rispondere; nuovo tentativo in corso…
    [upstream_unreachable] Al momento questo sito non riesce a raggiungere il servizio di verifica; nuovo tentativo in corso…
    [token_unavailable] Al momento questo sito non riesce a raggiungere il servizio di verifica; nuovo tentativo in corso…
    [too_many_sessions] Al momento questo sito sta gestendo molte verifiche; nuovo tentativo in corso…
    [too_many_connections] Al momento questo sito ha molti visitatori; nuovo tentativo in corso…
    [rate_limited] Da qui sono state appena avviate molte verifiche; nuovo tentativo in corso…
   *[other] Il servizio di verifica ha un problema in questo momento; nuovo tentativo in corso…
}
unreachable-start = Al momento non è possibile raggiungere questo sito. Controlli la connessione e ricominci.
unreadable = Questo sito ha dato una risposta che questa pagina non riesce a leggere. Per favore, ricominci.
# { $status } is an HTTP status code, such as 500.
http-error = Si è verificato un problema (HTTP { $status }). Per favore, ricominci.
session-unknown = Questa sessione non è più riconosciuta qui. Per favore, ricominci.

## Come termina una sessione

verified = Verificato. Il suo portafoglio ha presentato i dati qui sotto.
declined = Ha rifiutato di condividere un documento digitale. Non è stato condiviso nulla.
expired = La sessione è scaduta prima che venisse presentato un documento digitale.
failed = La verifica non è riuscita. Per favore, ricominci.
failed-claims-unusable = Il suo portafoglio ha presentato un documento digitale, ma questo sito non può mostrarne i dati (sono troppo grandi o non nel formato previsto). Non è stato conservato nulla. Per favore, ricominci o si rivolga al gestore del sito.
failed-answer-unreadable = Il servizio di verifica ha dato una risposta che questo sito non riesce a leggere. Per favore, ricominci o si rivolga al gestore del sito.
return-verified = Verificato. Ritorno al sito che ha fatto la richiesta…
return-declined = Ha rifiutato di condividere un documento digitale. Ritorno al sito che ha fatto la richiesta…
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
error-not_found = Questo sito non riconosce ciò che questa pagina ha chiesto. Per favore, ricominci.
error-method_not_allowed = Questo sito non accetta questo tipo di richiesta. Per favore, ricominci.
error-payload_too_large = Questa pagina ha inviato a questo sito più di quanto accetti. Per favore, ricominci.
error-unsupported_media_type = Questa pagina ha inviato a questo sito una richiesta in una forma che non accetta. Per favore, ricominci.
error-cross_site_request = Questo sito accetta solo richieste dalle proprie pagine. Lo apra direttamente e ricominci.
error-too_many_connections = Al momento questo sito ha troppi visitatori. Riprovi tra qualche minuto.
error-uri_too_long = L’indirizzo di questa pagina è troppo lungo per questo sito. Torni alla pagina da cui proviene e ricominci.

## Come vengono mostrati i dati

value-true = Sì
value-false = No
control-character = Un carattere di controllo, mostrato con il suo punto di codice
nested-too-deep = (annidato troppo in profondità per essere mostrato)
empty-list = (elenco vuoto)
empty-object = (oggetto vuoto)

## lanyard's own pages: a login it cannot go on with, and a path with no page

refused-title = Questo accesso non può proseguire
refused-advice = Torni al sito da cui proviene e ricominci. Se succede di nuovo, avvisi il suo gestore.
refused-repeated = La richiesta indica la propria applicazione o il proprio indirizzo di ritorno più di una volta.
refused-client-missing = La richiesta non indica quale applicazione la invia.
refused-client-unknown = L’applicazione che l’ha mandata qui non è nota a questo servizio.
refused-redirect-missing = La richiesta non indica dove tornare.
refused-redirect-unregistered = L’indirizzo di ritorno richiesto non è registrato per l’applicazione.
refused-stale = Questo accesso è scaduto o non è valido qui.
refused-unavailable = Al momento questo servizio non può avviare un accesso. Riprovi.
not-found-title = Pagina non trovata
not-found = A questo indirizzo non c’è alcuna pagina. Controlli l’indirizzo o torni al sito da cui proviene.

## Claims' labels, by the claim's key; a brand's own label for a claim wins

claim-sub = Identificativo
claim-name = Nome completo
claim-given_name = Nome
claim-family_name = Cognome
claim-middle_name = Secondo nome
claim-nickname = Soprannome
claim-preferred_username = Nome utente preferito
claim-profile = Pagina del profilo
claim-picture = Foto
claim-website = Sito web
claim-email = Indirizzo email
claim-email_address = Indirizzo email
claim-email_verified = Indirizzo email verificato
claim-gender = Genere
claim-sex = Sesso
claim-birthdate = Data di nascita
claim-birth_date = Data di nascita
claim-age_in_years = Età
claim-age_birth_year = Anno di nascita
claim-zoneinfo = Fuso orario
claim-locale = Lingua e area geografica
claim-phone_number = Numero di telefono
claim-mobile_phone_number = Numero di cellulare
claim-phone_number_verified = Numero di telefono verificato
claim-address = Indirizzo
claim-address-formatted = Indirizzo completo
claim-address-street_address = Via e numero civico
claim-address-locality = Città
claim-address-region = Regione
claim-address-postal_code = Codice postale
claim-address-country = Paese
claim-resident_address = Indirizzo di residenza
claim-resident_street = Via
claim-resident_house_number = Numero civico
claim-resident_postal_code = Codice postale
claim-resident_city = Città
claim-resident_state = Stato o regione
claim-resident_country = Paese di residenza
claim-updated_at = Ultimo aggiornamento
claim-nationality = Cittadinanza
claim-birth_place = Luogo di nascita
claim-place_of_birth = Luogo di nascita
claim-birth_country = Paese di nascita
claim-birth_city = Città di nascita
claim-family_name_birth = Cognome alla nascita
claim-given_name_birth = Nome alla nascita
claim-document_number = Numero del documento
claim-issuing_country = Paese di rilascio
claim-issuing_authority = Autorità di rilascio
claim-issuance_date = Data di rilascio
claim-issue_date = Data di rilascio
claim-expiry_date = Data di scadenza
claim-portrait = Fotografia
claim-age_over = { $age ->
    [one] Almeno { $age } anno
   *[other] Almeno { $age } anni
}
