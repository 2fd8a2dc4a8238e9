# The verification page's own text, in English: the source every other
# language in this folder translates. One file per language, named by its
# BCP 47 tag (de.ftl, pt-BR.ftl); adding a file adds the language, with no
# change to the code (docs/translations.md).
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
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $reason } Still trying…
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

## How claims are shown

value-true = Yes
value-false = No
control-character = A control character, shown by its code point
nested-too-deep = (nested too deeply to show)
empty-list = (empty list)
empty-object = (empty object)
