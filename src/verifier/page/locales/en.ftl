# The verification page's own text, in English: the source every other
# language in this folder translates. One file per language, named by its
# BCP 47 tag (de.ftl, pt-BR.ftl); adding a file adds the language, with no
# change to the code (docs/translations.md).
#
# Review: written in English by lanyard's developers; the source of
# every other file.
#
# Keep the same message ids in every file. A message missing from a
# translation shows in English. Placeables such as { $status } are filled
# in by the page; keep them as they are.

## About the language itself

# The language's own name for itself, as the language switch lists it.
language-name = English
# The direction the language is written in: ltr or rtl.
language-direction = ltr
# The language switch's label, for screen readers.
language-switch = Language

## The page

page-title = Verify a credential
intro = Share a credential from your wallet. You choose what is shared, and you can decline.
# { $asker } is the name of the site or application that asks.
asker = { $asker } asks you to verify a credential. Afterwards you return there.
purpose-title = Why this is asked
start = Verify with my wallet
present-title = Open your wallet
wallet-button = Open my wallet
show-qr = My wallet is on another device: show a QR code
hide-qr = Hide the QR code
scan-qr = Scan this code with your wallet app.
# { $site } is the host of the site that asks, as its address names it.
qr-site = Scan it only if you started signing in to { $site } yourself.
qr-label = QR code to scan with your wallet
same-device = My wallet is on this device
result-title = Presented claims
restart = Start again
logo-alt = { $name }

## What the page says while it works

starting = Starting…
waiting-mobile = Open your wallet to continue. Waiting for your wallet…
waiting-desktop = Scan the QR code with your wallet. Waiting for your wallet…
unreachable-retrying = Cannot reach this site right now; still trying…
busy-retrying = This site is busy right now. Still trying…
# What the page says while it retries, by the code of the error it met
# (error-… below): one whole sentence for each, not two joined.
retrying = { $code ->
    [upstream_timeout] The verification service is slow to answer; still trying…
    [upstream_unreachable] This site cannot reach the verification service right now; still trying…
    [token_unavailable] This site cannot reach the verification service right now; still trying…
    [too_many_sessions] This site is handling many verifications right now; still trying…
    [too_many_connections] This site has many visitors right now; still trying…
    [rate_limited] Many verifications were started from here just now; still trying…
   *[other] The verification service has a problem right now; still trying…
}
unreachable-start = Cannot reach this site right now. Check your connection and start again.
unreadable = This site gave an answer this page cannot read. Please start again.
# { $status } is an HTTP status code, such as 500.
http-error = Something went wrong (HTTP { $status }). Please start again.
session-unknown = This session is no longer known here. Please start again.

## How a session ends

verified = Verified. Your wallet presented the claims below.
declined = You declined to share a credential. Nothing was shared.
expired = The session expired before a credential was presented.
failed = The verification failed. Please start again.
failed-claims-unusable = Your wallet presented a credential, but this site cannot show its claims (they are too large or not in the expected form). Nothing was kept. Please start again, or ask the site's operator.
failed-answer-unreadable = The verification service gave an answer this site cannot read. Please start again, or ask the site's operator.
return-verified = Verified. Returning you to the site that asked…
return-declined = You declined to share a credential. Returning you to the site that asked…
return-expired = The session expired. Returning you to the site that asked…
return-failed = The verification failed. Returning you to the site that asked…

## Errors lanyard answers, by their code

error-rate_limited = Too many verifications were started from here just now. Please wait a moment and start again.
error-too_many_sessions = This site is handling too many verifications right now. Please try again in a few minutes.
error-token_unavailable = This site cannot reach the verification service right now. Please try again later.
error-service_refused = The verification service refused this site. The site's operator has been told.
error-rule_not_found = The verification service does not know what this site asks for. The site's operator has been told.
error-service_error = The verification service had a problem. Please try again in a moment.
error-upstream_unreachable = This site could not reach the verification service. Please try again in a moment.
error-upstream_timeout = The verification service did not answer in time. Please try again in a moment.
error-bad_request = This request cannot be handled. Go back to where you came from and start again.
error-not_found = This site does not know what this page asked for. Please start again.
error-method_not_allowed = This site does not take this kind of request. Please start again.
error-payload_too_large = This page sent this site more than it takes. Please start again.
error-unsupported_media_type = This page sent this site a request in a form it does not take. Please start again.
error-cross_site_request = This site takes requests from its own pages only. Open it directly and start again.
error-too_many_connections = This site has too many visitors right now. Please try again in a few minutes.
error-uri_too_long = This page's address is too long for this site. Go back to where you came from and start again.

## How claims are shown

value-true = Yes
value-false = No
control-character = A control character, shown by its code point
nested-too-deep = (nested too deeply to show)
empty-list = (empty list)
empty-object = (empty object)

## lanyard's own pages: a login it cannot go on with, and a path with no page

refused-title = This login cannot go on
refused-advice = Go back to the site you came from and start again. If this happens again, tell its operator.
refused-repeated = The request names its application or its return address more than once.
refused-client-missing = The request does not say which application asks.
refused-client-unknown = The application that sent you here is not one this service knows.
refused-redirect-missing = The request does not say where to return.
refused-redirect-unregistered = The address the request asks to return to is not one registered for the application.
refused-stale = This login has expired or is not valid here.
refused-unavailable = This service cannot start a login right now. Please try again.
not-found-title = Page not found
not-found = There is no page at this address. Check the address, or go back to the site you came from.

## Claims' labels, by the claim's key; a brand's own label for a claim wins

# claim-KEY labels the claim KEY; claim-KEY-PART a part of it (the
# address claim's postal_code). { $age } is the NN of age_over_NN, a
# number: a language with plural forms selects on it.
claim-sub = Identifier
claim-name = Full name
claim-given_name = Given name
claim-family_name = Family name
claim-middle_name = Middle name
claim-nickname = Nickname
claim-preferred_username = Preferred username
claim-profile = Profile page
claim-picture = Picture
claim-website = Website
claim-email = Email address
claim-email_address = Email address
claim-email_verified = Email address verified
claim-gender = Gender
claim-sex = Sex
claim-birthdate = Birth date
claim-birth_date = Birth date
claim-age_in_years = Age
claim-age_birth_year = Year of birth
claim-zoneinfo = Time zone
claim-locale = Language and region
claim-phone_number = Phone number
claim-mobile_phone_number = Mobile phone number
claim-phone_number_verified = Phone number verified
claim-address = Address
claim-address-formatted = Full address
claim-address-street_address = Street address
claim-address-locality = City
claim-address-region = Region
claim-address-postal_code = Postal code
claim-address-country = Country
claim-resident_address = Address
claim-resident_street = Street
claim-resident_house_number = House number
claim-resident_postal_code = Postal code
claim-resident_city = City
claim-resident_state = State or region
claim-resident_country = Country of residence
claim-updated_at = Last updated
claim-nationality = Nationality
claim-birth_place = Place of birth
claim-place_of_birth = Place of birth
claim-birth_country = Country of birth
claim-birth_city = City of birth
claim-family_name_birth = Family name at birth
claim-given_name_birth = Given name at birth
claim-document_number = Document number
claim-issuing_country = Issuing country
claim-issuing_authority = Issuing authority
claim-issuance_date = Issue date
claim-issue_date = Issue date
claim-expiry_date = Expiry date
claim-portrait = Portrait
claim-age_over = { $age ->
    [one] At least { $age } year old
   *[other] At least { $age } years old
}
