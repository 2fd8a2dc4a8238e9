# Arabic (Modern Standard) translation of en.ftl, the verification page's
# own text. No native speaker has reviewed it yet: corrections are welcome.
# Keep the message ids and the placeables such as { $status } as they are.
# "Credential" is translated as وثيقة throughout. To suit every reader, the
# text avoids gendered imperatives: it uses يُرجى with a verbal noun, or
# forms written the same for a man and a woman.

## عن اللغة نفسها

# The language's own name for itself, as the language switch lists it.
language-name = العربية
# The direction the language is written in: ltr or rtl.
language-direction = rtl
# The language switch's label, for screen readers.
language-switch = اللغة

## الصفحة

page-title = التحقق من وثيقة
intro = يمكنك مشاركة وثيقة من محفظتك. أنت من يختار ما تتم مشاركته، ويمكنك الرفض.
# { $asker } is the name of the site or application that asks.
asker = يطلب منك { $asker } التحقق من وثيقة، ثم ستتم إعادتك إليه.
purpose-title = سبب هذا الطلب
start = التحقق باستخدام محفظتي
present-title = فتح محفظتك
wallet-button = فتح محفظتي
show-qr = محفظتي على جهاز آخر: عرض رمز QR
hide-qr = إخفاء رمز QR
scan-qr = يُرجى مسح هذا الرمز باستخدام تطبيق المحفظة.
# { $site } is the host of the site that asks, as its address names it.
qr-site = لا تمسحه إلا إذا كنت أنت من بدأ تسجيل الدخول إلى { $site }.
qr-label = رمز QR للمسح باستخدام محفظتك
same-device = محفظتي على هذا الجهاز
result-title = المعلومات المقدمة
restart = البدء من جديد
logo-alt = { $name }

## ما تعرضه الصفحة أثناء عملها

starting = جارٍ البدء…
waiting-mobile = يُرجى فتح محفظتك للمتابعة. في انتظار محفظتك…
waiting-desktop = يُرجى مسح رمز QR باستخدام محفظتك. في انتظار محفظتك…
unreachable-retrying = يتعذر الوصول إلى هذا الموقع حاليًا؛ جارٍ إعادة المحاولة…
busy-retrying = هذا الموقع مشغول حاليًا. جارٍ إعادة المحاولة…
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $reason } جارٍ إعادة المحاولة…
unreachable-start = يتعذر الوصول إلى هذا الموقع حاليًا. يُرجى التحقق من اتصالك والبدء من جديد.
unreadable = قدّم هذا الموقع ردًا لا تستطيع هذه الصفحة قراءته. يُرجى البدء من جديد.
# { $status } is an HTTP status code, such as 500.
http-error = حدث خطأ ما (HTTP { $status }). يُرجى البدء من جديد.
session-unknown = لم تعد هذه الجلسة معروفة هنا. يُرجى البدء من جديد.

## كيف تنتهي الجلسة

verified = تم التحقق. قدّمت محفظتك المعلومات الواردة أدناه.
declined = لقد رفضت مشاركة وثيقة. لم تتم مشاركة أي شيء.
expired = انتهت صلاحية الجلسة قبل تقديم أي وثيقة.
failed = فشل التحقق. يُرجى البدء من جديد.
failed-claims-unusable = قدّمت محفظتك وثيقة، لكن هذا الموقع لا يستطيع عرض معلوماتها (فهي كبيرة جدًا أو ليست بالشكل المتوقع). لم يُحتفظ بأي شيء. يُرجى البدء من جديد، أو التواصل مع الجهة المشغلة للموقع.
failed-answer-unreadable = قدّمت خدمة التحقق ردًا لا يستطيع هذا الموقع قراءته. يُرجى البدء من جديد، أو التواصل مع الجهة المشغلة للموقع.
return-verified = تم التحقق. جارٍ إعادتك إلى الموقع الذي طلب ذلك…
return-declined = لقد رفضت مشاركة وثيقة. جارٍ إعادتك إلى الموقع الذي طلب ذلك…
return-expired = انتهت صلاحية الجلسة. جارٍ إعادتك إلى الموقع الذي طلب ذلك…
return-failed = فشل التحقق. جارٍ إعادتك إلى الموقع الذي طلب ذلك…

## الأخطاء التي يرد بها lanyard، حسب رموزها

error-rate_limited = بدأت عمليات تحقق كثيرة جدًا من هنا قبل قليل. يُرجى الانتظار لحظة ثم البدء من جديد.
error-too_many_sessions = يعالج هذا الموقع عددًا كبيرًا جدًا من عمليات التحقق حاليًا. يُرجى المحاولة مرة أخرى بعد بضع دقائق.
error-token_unavailable = لا يستطيع هذا الموقع الوصول إلى خدمة التحقق حاليًا. يُرجى المحاولة مرة أخرى لاحقًا.
error-service_refused = رفضت خدمة التحقق هذا الموقع. تم إبلاغ الجهة المشغلة للموقع.
error-rule_not_found = لا تعرف خدمة التحقق ما يطلبه هذا الموقع. تم إبلاغ الجهة المشغلة للموقع.
error-service_error = واجهت خدمة التحقق مشكلة. يُرجى المحاولة مرة أخرى بعد لحظات.
error-upstream_unreachable = تعذر على هذا الموقع الوصول إلى خدمة التحقق. يُرجى المحاولة مرة أخرى بعد لحظات.
error-upstream_timeout = لم تستجب خدمة التحقق في الوقت المحدد. يُرجى المحاولة مرة أخرى بعد لحظات.
error-bad_request = لا يمكن معالجة هذا الطلب. يُرجى العودة إلى الصفحة التي جئت منها والبدء من جديد.

## طريقة عرض المعلومات

value-true = نعم
value-false = لا
control-character = حرف تحكم، معروض برقم نقطة الترميز الخاصة به
nested-too-deep = (متداخل بعمق كبير لا يسمح بعرضه)
empty-list = (قائمة فارغة)
empty-object = (كائن فارغ)
