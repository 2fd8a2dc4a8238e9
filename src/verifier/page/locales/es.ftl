# Spanish translation of en.ftl, the verification page's own text.
# Review: machine-written. A native speaker's review raised the word for an
# overloaded site ("ocupado"), and the retry message that joined two
# sentences ("{reason} Still trying…"); those were reworded here, and the
# rewording has not yet been checked by a native speaker. Nothing else in
# this file has been reviewed by a native speaker. Corrections are welcome.
# Keep the message ids and the placeables such as { $status } as they are.

## Sobre el propio idioma

# The language's own name for itself, as the language switch lists it.
language-name = Español
# The direction the language is written in: ltr or rtl.
language-direction = ltr
# The language switch's label, for screen readers.
language-switch = Idioma

## La página

page-title = Verificar una credencial
intro = Comparta una credencial de su cartera. Usted elige qué se comparte y puede rechazar la solicitud.
# { $asker } is the name of the site or application that asks.
asker = { $asker } le pide que verifique una credencial. Después volverá allí.
purpose-title = Por qué se solicita
start = Verificar con mi cartera
present-title = Abra su cartera
wallet-button = Abrir mi cartera
show-qr = Mi cartera está en otro dispositivo: mostrar un código QR
hide-qr = Ocultar el código QR
scan-qr = Escanee este código con la aplicación de su cartera.
# { $site } is the host of the site that asks, as its address names it.
qr-site = Escanéelo solo si usted mismo empezó a iniciar sesión en { $site }.
qr-label = Código QR para escanear con su cartera
same-device = Mi cartera está en este dispositivo
result-title = Datos presentados
restart = Empezar de nuevo
logo-alt = { $name }

## Lo que dice la página mientras trabaja

starting = Iniciando…
waiting-mobile = Abra su cartera para continuar. Esperando a su cartera…
waiting-desktop = Escanee el código QR con su cartera. Esperando a su cartera…
unreachable-retrying = No se puede acceder a este sitio en este momento; seguimos intentándolo…
busy-retrying = Este sitio está saturado en este momento. Seguimos intentándolo…
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $code ->
    [upstream_timeout] El servicio de verificación tarda en responder; seguimos intentándolo…
    [upstream_unreachable] Este sitio no puede acceder al servicio de verificación en este momento; seguimos intentándolo…
    [token_unavailable] Este sitio no puede acceder al servicio de verificación en este momento; seguimos intentándolo…
    [too_many_sessions] Este sitio está gestionando muchas verificaciones en este momento; seguimos intentándolo…
    [too_many_connections] Este sitio tiene muchas visitas en este momento; seguimos intentándolo…
    [rate_limited] Se acaban de iniciar muchas verificaciones desde aquí; seguimos intentándolo…
   *[other] El servicio de verificación tiene un problema en este momento; seguimos intentándolo…
}
unreachable-start = No se puede acceder a este sitio en este momento. Compruebe su conexión y empiece de nuevo.
unreadable = Este sitio ha dado una respuesta que esta página no puede leer. Por favor, empiece de nuevo.
# { $status } is an HTTP status code, such as 500.
http-error = Algo ha salido mal (HTTP { $status }). Por favor, empiece de nuevo.
session-unknown = Esta sesión ya no se reconoce aquí. Por favor, empiece de nuevo.

## Cómo termina una sesión

verified = Verificado. Su cartera ha presentado los datos siguientes.
declined = Ha rechazado compartir una credencial. No se ha compartido nada.
expired = La sesión ha caducado antes de que se presentara una credencial.
failed = La verificación ha fallado. Por favor, empiece de nuevo.
failed-claims-unusable = Su cartera ha presentado una credencial, pero este sitio no puede mostrar sus datos (son demasiado grandes o no tienen la forma esperada). No se ha guardado nada. Por favor, empiece de nuevo o consulte al responsable del sitio.
failed-answer-unreadable = El servicio de verificación ha dado una respuesta que este sitio no puede leer. Por favor, empiece de nuevo o consulte al responsable del sitio.
return-verified = Verificado. Le llevamos de vuelta al sitio que lo solicitó…
return-declined = Ha rechazado compartir una credencial. Le llevamos de vuelta al sitio que lo solicitó…
return-expired = La sesión ha caducado. Le llevamos de vuelta al sitio que lo solicitó…
return-failed = La verificación ha fallado. Le llevamos de vuelta al sitio que lo solicitó…

## Errores que devuelve lanyard, según su código

error-rate_limited = Se acaban de iniciar demasiadas verificaciones desde aquí. Espere un momento y empiece de nuevo.
error-too_many_sessions = Este sitio está gestionando demasiadas verificaciones en este momento. Vuelva a intentarlo dentro de unos minutos.
error-token_unavailable = Este sitio no puede acceder al servicio de verificación en este momento. Vuelva a intentarlo más tarde.
error-service_refused = El servicio de verificación ha rechazado este sitio. Se ha informado al responsable del sitio.
error-rule_not_found = El servicio de verificación no sabe qué solicita este sitio. Se ha informado al responsable del sitio.
error-service_error = El servicio de verificación ha tenido un problema. Vuelva a intentarlo en un momento.
error-upstream_unreachable = Este sitio no ha podido acceder al servicio de verificación. Vuelva a intentarlo en un momento.
error-upstream_timeout = El servicio de verificación no ha respondido a tiempo. Vuelva a intentarlo en un momento.
error-bad_request = Esta solicitud no se puede procesar. Vuelva a la página de la que venía y empiece de nuevo.
error-not_found = Este sitio no reconoce lo que ha solicitado esta página. Por favor, empiece de nuevo.
error-method_not_allowed = Este sitio no acepta este tipo de solicitud. Por favor, empiece de nuevo.
error-payload_too_large = Esta página ha enviado a este sitio más de lo que acepta. Por favor, empiece de nuevo.
error-unsupported_media_type = Esta página ha enviado a este sitio una solicitud en un formato que no acepta. Por favor, empiece de nuevo.
error-cross_site_request = Este sitio solo acepta solicitudes de sus propias páginas. Ábralo directamente y empiece de nuevo.
error-too_many_connections = Este sitio tiene demasiadas visitas en este momento. Vuelva a intentarlo dentro de unos minutos.
error-uri_too_long = La dirección de esta página es demasiado larga para este sitio. Vuelva a la página de la que venía y empiece de nuevo.

## Cómo se muestran los datos

value-true = Sí
value-false = No
control-character = Un carácter de control, mostrado mediante su punto de código
nested-too-deep = (anidado a demasiada profundidad para mostrarse)
empty-list = (lista vacía)
empty-object = (objeto vacío)

## lanyard's own pages: a login it cannot go on with, and a path with no page

refused-title = Este inicio de sesión no puede continuar
refused-advice = Vuelva al sitio del que venía y empiece de nuevo. Si vuelve a ocurrir, avise a su responsable.
refused-repeated = La solicitud indica su aplicación o su dirección de retorno más de una vez.
refused-client-missing = La solicitud no indica qué aplicación la hace.
refused-client-unknown = Este servicio no reconoce la aplicación que le ha enviado aquí.
refused-redirect-missing = La solicitud no indica adónde volver.
refused-redirect-unregistered = La dirección de retorno solicitada no está registrada para la aplicación.
refused-stale = Este inicio de sesión ha caducado o no es válido aquí.
refused-unavailable = Este servicio no puede iniciar una sesión en este momento. Vuelva a intentarlo.
not-found-title = Página no encontrada
not-found = No hay ninguna página en esta dirección. Compruebe la dirección o vuelva al sitio del que venía.

## Claims' labels, by the claim's key; a brand's own label for a claim wins

claim-sub = Identificador
claim-name = Nombre completo
claim-given_name = Nombre
claim-family_name = Apellidos
claim-middle_name = Segundo nombre
claim-nickname = Apodo
claim-preferred_username = Nombre de usuario preferido
claim-profile = Página de perfil
claim-picture = Foto
claim-website = Sitio web
claim-email = Correo electrónico
claim-email_address = Correo electrónico
claim-email_verified = Correo electrónico verificado
claim-gender = Género
claim-sex = Sexo
claim-birthdate = Fecha de nacimiento
claim-birth_date = Fecha de nacimiento
claim-age_in_years = Edad
claim-age_birth_year = Año de nacimiento
claim-zoneinfo = Zona horaria
claim-locale = Idioma y región
claim-phone_number = Número de teléfono
claim-mobile_phone_number = Número de móvil
claim-phone_number_verified = Número de teléfono verificado
claim-address = Dirección
claim-address-formatted = Dirección completa
claim-address-street_address = Calle y número
claim-address-locality = Localidad
claim-address-region = Región
claim-address-postal_code = Código postal
claim-address-country = País
claim-resident_address = Dirección
claim-resident_street = Calle
claim-resident_house_number = Número
claim-resident_postal_code = Código postal
claim-resident_city = Localidad
claim-resident_state = Estado o región
claim-resident_country = País de residencia
claim-updated_at = Última actualización
claim-nationality = Nacionalidad
claim-birth_place = Lugar de nacimiento
claim-place_of_birth = Lugar de nacimiento
claim-birth_country = País de nacimiento
claim-birth_city = Ciudad de nacimiento
claim-family_name_birth = Apellidos de nacimiento
claim-given_name_birth = Nombre de nacimiento
claim-document_number = Número del documento
claim-issuing_country = País de expedición
claim-issuing_authority = Autoridad de expedición
claim-issuance_date = Fecha de expedición
claim-issue_date = Fecha de expedición
claim-expiry_date = Fecha de caducidad
claim-portrait = Fotografía
claim-age_over = { $age ->
    [one] Al menos { $age } año
   *[other] Al menos { $age } años
}
