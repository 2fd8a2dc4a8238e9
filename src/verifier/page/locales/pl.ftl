# Polish translation of en.ftl, the verification page's own text.
# No native speaker has reviewed it yet: corrections are welcome.
# Keep the message ids and the placeables such as { $status } as they are.
# The page addresses the reader with "Proszę" and an infinitive, or
# impersonally, so the text suits both Pan and Pani; buttons that speak in
# the reader's own voice ("my wallet") use the usual imperative.

## O samym języku

# The language's own name for itself, as the language switch lists it.
language-name = Polski
# The direction the language is written in: ltr or rtl.
language-direction = ltr
# The language switch's label, for screen readers.
language-switch = Język

## Strona

page-title = Weryfikacja poświadczenia
intro = Proszę udostępnić poświadczenie ze swojego portfela. To, co zostanie udostępnione, wybiera się samodzielnie; można też odmówić.
# { $asker } is the name of the site or application that asks.
asker = { $asker } prosi o weryfikację poświadczenia. Po jej zakończeniu nastąpi powrót do tego serwisu.
purpose-title = Cel prośby
start = Zweryfikuj za pomocą mojego portfela
present-title = Proszę otworzyć portfel
wallet-button = Otwórz mój portfel
show-qr = Mój portfel jest na innym urządzeniu: pokaż kod QR
hide-qr = Ukryj kod QR
scan-qr = Proszę zeskanować ten kod aplikacją portfela.
# { $site } is the host of the site that asks, as its address names it.
qr-site = Proszę go skanować tylko wtedy, gdy samodzielnie rozpoczęto logowanie w { $site }.
qr-label = Kod QR do zeskanowania portfelem
same-device = Mój portfel jest na tym urządzeniu
result-title = Przedstawione dane
restart = Zacznij od nowa
logo-alt = { $name }

## Komunikaty wyświetlane w trakcie działania strony

starting = Uruchamianie…
waiting-mobile = Aby kontynuować, proszę otworzyć portfel. Oczekiwanie na portfel…
waiting-desktop = Proszę zeskanować kod QR portfelem. Oczekiwanie na portfel…
unreachable-retrying = Nie można teraz połączyć się z tym serwisem; ponawianie prób…
busy-retrying = Ten serwis jest teraz przeciążony. Ponawianie prób…
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $reason } Ponawianie prób…
unreachable-start = Nie można teraz połączyć się z tym serwisem. Proszę sprawdzić połączenie i zacząć od nowa.
unreadable = Ten serwis udzielił odpowiedzi, której ta strona nie potrafi odczytać. Proszę zacząć od nowa.
# { $status } is an HTTP status code, such as 500.
http-error = Coś poszło nie tak (HTTP { $status }). Proszę zacząć od nowa.
session-unknown = Ta sesja nie jest już tu znana. Proszę zacząć od nowa.

## Jak kończy się sesja

verified = Zweryfikowano. Portfel przedstawił poniższe dane.
declined = Odmówiono udostępnienia poświadczenia. Nic nie zostało udostępnione.
expired = Sesja wygasła, zanim przedstawiono poświadczenie.
failed = Weryfikacja nie powiodła się. Proszę zacząć od nowa.
failed-claims-unusable = Portfel przedstawił poświadczenie, ale ten serwis nie może wyświetlić jego danych (są zbyt duże lub nie mają oczekiwanej postaci). Niczego nie zachowano. Proszę zacząć od nowa lub skontaktować się z operatorem serwisu.
failed-answer-unreadable = Usługa weryfikacji udzieliła odpowiedzi, której ten serwis nie potrafi odczytać. Proszę zacząć od nowa lub skontaktować się z operatorem serwisu.
return-verified = Zweryfikowano. Trwa powrót do serwisu, który o to prosił…
return-declined = Odmówiono udostępnienia poświadczenia. Trwa powrót do serwisu, który o to prosił…
return-expired = Sesja wygasła. Trwa powrót do serwisu, który o to prosił…
return-failed = Weryfikacja nie powiodła się. Trwa powrót do serwisu, który o to prosił…

## Błędy zwracane przez lanyard, według kodu

error-rate_limited = Przed chwilą rozpoczęto stąd zbyt wiele weryfikacji. Proszę chwilę poczekać i zacząć od nowa.
error-too_many_sessions = Ten serwis obsługuje teraz zbyt wiele weryfikacji. Proszę spróbować ponownie za kilka minut.
error-token_unavailable = Ten serwis nie może teraz połączyć się z usługą weryfikacji. Proszę spróbować ponownie później.
error-service_refused = Usługa weryfikacji odrzuciła ten serwis. Operator serwisu został powiadomiony.
error-rule_not_found = Usługa weryfikacji nie wie, o co prosi ten serwis. Operator serwisu został powiadomiony.
error-service_error = W usłudze weryfikacji wystąpił problem. Proszę spróbować ponownie za chwilę.
error-upstream_unreachable = Ten serwis nie mógł połączyć się z usługą weryfikacji. Proszę spróbować ponownie za chwilę.
error-upstream_timeout = Usługa weryfikacji nie odpowiedziała na czas. Proszę spróbować ponownie za chwilę.
error-bad_request = Nie można obsłużyć tego żądania. Proszę wrócić do poprzedniej strony i zacząć od nowa.

## Sposób wyświetlania danych

value-true = Tak
value-false = Nie
control-character = Znak sterujący, wyświetlony jako jego punkt kodowy
nested-too-deep = (zbyt głęboko zagnieżdżone, by je wyświetlić)
empty-list = (pusta lista)
empty-object = (pusty obiekt)
