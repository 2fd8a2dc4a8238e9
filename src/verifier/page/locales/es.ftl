# Spanish translation of en.ftl, the verification page's own text.
# No native speaker has reviewed it yet: corrections are welcome.
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
busy-retrying = Este sitio está ocupado en este momento. Seguimos intentándolo…
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $reason } Seguimos intentándolo…
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

## Cómo se muestran los datos

value-true = Sí
value-false = No
control-character = Un carácter de control, mostrado mediante su punto de código
nested-too-deep = (anidado a demasiada profundidad para mostrarse)
empty-list = (lista vacía)
empty-object = (objeto vacío)
