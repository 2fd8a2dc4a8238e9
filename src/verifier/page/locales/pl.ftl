# Polish translation of en.ftl, the verification page's own text.
# Review: machine-written. A native speaker's review raised who declined
# ("Odmówiono udostępnienia…" read as if the system refused: the person is
# now the subject), and the retry message that joined two sentences
# ("{reason} Still trying…"); those were reworded here, and the rewording
# has not yet been checked by a native speaker. Nothing else in this file
# has been reviewed by a native speaker. Corrections are welcome.
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
retrying = { $code ->
    [upstream_timeout] Usługa weryfikacji odpowiada z opóźnieniem; ponawianie prób…
    [upstream_unreachable] Ten serwis nie może teraz połączyć się z usługą weryfikacji; ponawianie prób…
    [token_unavailable] Ten serwis nie może teraz połączyć się z usługą weryfikacji; ponawianie prób…
    [too_many_sessions] Ten serwis obsługuje teraz bardzo wiele weryfikacji; ponawianie prób…
    [too_many_connections] Ten serwis ma teraz bardzo wielu odwiedzających; ponawianie prób…
    [rate_limited] Przed chwilą rozpoczęto stąd wiele weryfikacji; ponawianie prób…
   *[other] W usłudze weryfikacji wystąpił problem; ponawianie prób…
}
unreachable-start = Nie można teraz połączyć się z tym serwisem. Proszę sprawdzić połączenie i zacząć od nowa.
unreadable = Ten serwis udzielił odpowiedzi, której ta strona nie potrafi odczytać. Proszę zacząć od nowa.
# { $status } is an HTTP status code, such as 500.
http-error = Coś poszło nie tak (HTTP { $status }). Proszę zacząć od nowa.
session-unknown = Ta sesja nie jest już tu znana. Proszę zacząć od nowa.

## Jak kończy się sesja

verified = Zweryfikowano. Portfel przedstawił poniższe dane.
declined = Odmówił(a) Pan/Pani udostępnienia poświadczenia. Nic nie zostało udostępnione.
expired = Sesja wygasła, zanim przedstawiono poświadczenie.
failed = Weryfikacja nie powiodła się. Proszę zacząć od nowa.
failed-claims-unusable = Portfel przedstawił poświadczenie, ale ten serwis nie może wyświetlić jego danych (są zbyt duże lub nie mają oczekiwanej postaci). Niczego nie zachowano. Proszę zacząć od nowa lub skontaktować się z operatorem serwisu.
failed-answer-unreadable = Usługa weryfikacji udzieliła odpowiedzi, której ten serwis nie potrafi odczytać. Proszę zacząć od nowa lub skontaktować się z operatorem serwisu.
return-verified = Zweryfikowano. Trwa powrót do serwisu, który o to prosił…
return-declined = Odmówił(a) Pan/Pani udostępnienia poświadczenia. Trwa powrót do serwisu, który o to prosił…
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
error-not_found = Ten serwis nie rozpoznaje tego, o co poprosiła ta strona. Proszę zacząć od nowa.
error-method_not_allowed = Ten serwis nie przyjmuje tego rodzaju żądań. Proszę zacząć od nowa.
error-payload_too_large = Ta strona wysłała do serwisu więcej danych, niż przyjmuje. Proszę zacząć od nowa.
error-unsupported_media_type = Ta strona wysłała do serwisu żądanie w postaci, której nie przyjmuje. Proszę zacząć od nowa.
error-cross_site_request = Ten serwis przyjmuje żądania tylko z własnych stron. Proszę otworzyć go bezpośrednio i zacząć od nowa.
error-too_many_connections = Ten serwis ma teraz zbyt wielu odwiedzających. Proszę spróbować ponownie za kilka minut.
error-uri_too_long = Adres tej strony jest dla tego serwisu zbyt długi. Proszę wrócić do poprzedniej strony i zacząć od nowa.

## Sposób wyświetlania danych

value-true = Tak
value-false = Nie
control-character = Znak sterujący, wyświetlony jako jego punkt kodowy
nested-too-deep = (zbyt głęboko zagnieżdżone, by je wyświetlić)
empty-list = (pusta lista)
empty-object = (pusty obiekt)

## lanyard's own pages: a login it cannot go on with, and a path with no page

refused-title = Tego logowania nie można kontynuować
refused-advice = Proszę wrócić do serwisu, z którego nastąpiło przekierowanie, i zacząć od nowa. Jeśli to się powtórzy, proszę powiadomić jego operatora.
refused-repeated = Żądanie podaje swoją aplikację lub adres powrotu więcej niż raz.
refused-client-missing = Żądanie nie podaje, która aplikacja prosi.
refused-client-unknown = Aplikacja, która tu przekierowała, nie jest znana tej usłudze.
refused-redirect-missing = Żądanie nie podaje, dokąd wrócić.
refused-redirect-unregistered = Adres powrotu podany w żądaniu nie jest zarejestrowany dla tej aplikacji.
refused-stale = To logowanie wygasło lub nie jest tu ważne.
refused-unavailable = Ta usługa nie może teraz rozpocząć logowania. Proszę spróbować ponownie.
not-found-title = Nie znaleziono strony
not-found = Pod tym adresem nie ma strony. Proszę sprawdzić adres lub wrócić do serwisu, z którego nastąpiło przekierowanie.

## Claims' labels, by the claim's key; a brand's own label for a claim wins

claim-sub = Identyfikator
claim-name = Imię i nazwisko
claim-given_name = Imię
claim-family_name = Nazwisko
claim-middle_name = Drugie imię
claim-nickname = Pseudonim
claim-preferred_username = Preferowana nazwa użytkownika
claim-profile = Strona profilu
claim-picture = Zdjęcie
claim-website = Strona internetowa
claim-email = Adres e-mail
claim-email_address = Adres e-mail
claim-email_verified = Adres e-mail zweryfikowany
claim-gender = Płeć
claim-sex = Płeć
claim-birthdate = Data urodzenia
claim-birth_date = Data urodzenia
claim-age_in_years = Wiek
claim-age_birth_year = Rok urodzenia
claim-zoneinfo = Strefa czasowa
claim-locale = Język i region
claim-phone_number = Numer telefonu
claim-mobile_phone_number = Numer telefonu komórkowego
claim-phone_number_verified = Numer telefonu zweryfikowany
claim-address = Adres
claim-address-formatted = Pełny adres
claim-address-street_address = Ulica i numer
claim-address-locality = Miejscowość
claim-address-region = Region
claim-address-postal_code = Kod pocztowy
claim-address-country = Kraj
claim-resident_address = Adres zamieszkania
claim-resident_street = Ulica
claim-resident_house_number = Numer domu
claim-resident_postal_code = Kod pocztowy
claim-resident_city = Miejscowość
claim-resident_state = Województwo lub region
claim-resident_country = Kraj zamieszkania
claim-updated_at = Ostatnia aktualizacja
claim-nationality = Obywatelstwo
claim-birth_place = Miejsce urodzenia
claim-place_of_birth = Miejsce urodzenia
claim-birth_country = Kraj urodzenia
claim-birth_city = Miasto urodzenia
claim-family_name_birth = Nazwisko rodowe
claim-given_name_birth = Imię przy urodzeniu
claim-document_number = Numer dokumentu
claim-issuing_country = Kraj wydania
claim-issuing_authority = Organ wydający
claim-issuance_date = Data wydania
claim-issue_date = Data wydania
claim-expiry_date = Data ważności
claim-portrait = Zdjęcie
claim-age_over = { $age ->
    [one] Ukończony { $age } rok
    [few] Ukończone { $age } lata
    [many] Ukończone { $age } lat
   *[other] Ukończone { $age } roku
}
