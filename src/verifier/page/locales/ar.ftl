# Arabic (Modern Standard) translation of en.ftl, the verification page's
# own text.
# Review: machine-written. A native speaker's review raised the requester's
# gender (a requester's name such as وزارة or جامعة is often feminine: the
# requester is no longer a verb's subject, and returns go to الجهة الطالبة)
# and the word for an overloaded site ("مشغول"), and the retry message that
# joined two sentences ("{reason} Still trying…"); those were reworded here,
# and the rewording has not yet been checked by a native speaker. Nothing
# else in this file has been reviewed by a native speaker. Corrections are
# welcome.
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
asker = هذا طلب من { $asker } للتحقق من وثيقة، وبعده تتم إعادتك إلى الجهة الطالبة.
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
busy-retrying = يشهد هذا الموقع ضغطًا كبيرًا حاليًا. جارٍ إعادة المحاولة…
# { $reason } is one of the sentences below, about what went wrong.
retrying = { $code ->
    [upstream_timeout] تتأخر خدمة التحقق في الاستجابة؛ جارٍ إعادة المحاولة…
    [upstream_unreachable] يتعذر على هذا الموقع الوصول إلى خدمة التحقق حاليًا؛ جارٍ إعادة المحاولة…
    [token_unavailable] يتعذر على هذا الموقع الوصول إلى خدمة التحقق حاليًا؛ جارٍ إعادة المحاولة…
    [too_many_sessions] يعالج هذا الموقع عددًا كبيرًا من عمليات التحقق حاليًا؛ جارٍ إعادة المحاولة…
    [too_many_connections] يشهد هذا الموقع عددًا كبيرًا من الزوار حاليًا؛ جارٍ إعادة المحاولة…
    [rate_limited] بدأت عمليات تحقق كثيرة من هنا قبل قليل؛ جارٍ إعادة المحاولة…
   *[other] تواجه خدمة التحقق مشكلة حاليًا؛ جارٍ إعادة المحاولة…
}
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
return-verified = تم التحقق. جارٍ إعادتك إلى الجهة الطالبة…
return-declined = لقد رفضت مشاركة وثيقة. جارٍ إعادتك إلى الجهة الطالبة…
return-expired = انتهت صلاحية الجلسة. جارٍ إعادتك إلى الجهة الطالبة…
return-failed = فشل التحقق. جارٍ إعادتك إلى الجهة الطالبة…

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
error-not_found = لا يعرف هذا الموقع ما طلبته هذه الصفحة. يُرجى البدء من جديد.
error-method_not_allowed = لا يقبل هذا الموقع هذا النوع من الطلبات. يُرجى البدء من جديد.
error-payload_too_large = أرسلت هذه الصفحة إلى الموقع أكثر مما يقبله. يُرجى البدء من جديد.
error-unsupported_media_type = أرسلت هذه الصفحة إلى الموقع طلبًا بصيغة لا يقبلها. يُرجى البدء من جديد.
error-cross_site_request = لا يقبل هذا الموقع إلا الطلبات الواردة من صفحاته. يُرجى فتحه مباشرة والبدء من جديد.
error-too_many_connections = يشهد هذا الموقع عددًا كبيرًا جدًا من الزوار حاليًا. يُرجى المحاولة مرة أخرى بعد بضع دقائق.
error-uri_too_long = عنوان هذه الصفحة أطول مما يقبله هذا الموقع. يُرجى العودة إلى الصفحة التي جئت منها والبدء من جديد.

## طريقة عرض المعلومات

value-true = نعم
value-false = لا
control-character = حرف تحكم، معروض برقم نقطة الترميز الخاصة به
nested-too-deep = (متداخل بعمق كبير لا يسمح بعرضه)
empty-list = (قائمة فارغة)
empty-object = (كائن فارغ)

## lanyard's own pages: a login it cannot go on with, and a path with no page

refused-title = لا يمكن متابعة تسجيل الدخول هذا
refused-advice = يُرجى العودة إلى الموقع الذي جئت منه والبدء من جديد. إذا تكرر ذلك، يُرجى إبلاغ الجهة المشغلة له.
refused-repeated = يذكر الطلب تطبيقه أو عنوان العودة أكثر من مرة.
refused-client-missing = لا يذكر الطلب التطبيق الذي يطلب.
refused-client-unknown = التطبيق الذي أرسلك إلى هنا غير معروف لهذه الخدمة.
refused-redirect-missing = لا يذكر الطلب عنوان العودة.
refused-redirect-unregistered = عنوان العودة المطلوب غير مسجل لهذا التطبيق.
refused-stale = انتهت صلاحية تسجيل الدخول هذا أو أنه غير صالح هنا.
refused-unavailable = لا تستطيع هذه الخدمة بدء تسجيل الدخول حاليًا. يُرجى المحاولة مرة أخرى.
not-found-title = الصفحة غير موجودة
not-found = لا توجد صفحة على هذا العنوان. يُرجى التحقق من العنوان أو العودة إلى الموقع الذي جئت منه.

## Claims' labels, by the claim's key; a brand's own label for a claim wins

claim-sub = المعرّف
claim-name = الاسم الكامل
claim-given_name = الاسم الأول
claim-family_name = اسم العائلة
claim-middle_name = الاسم الأوسط
claim-nickname = اللقب
claim-preferred_username = اسم المستخدم المفضل
claim-profile = صفحة الملف الشخصي
claim-picture = الصورة
claim-website = الموقع الإلكتروني
claim-email = البريد الإلكتروني
claim-email_address = البريد الإلكتروني
claim-email_verified = تم التحقق من البريد الإلكتروني
claim-gender = الجنس
claim-sex = الجنس
claim-birthdate = تاريخ الميلاد
claim-birth_date = تاريخ الميلاد
claim-age_in_years = العمر
claim-age_birth_year = سنة الميلاد
claim-zoneinfo = المنطقة الزمنية
claim-locale = اللغة والمنطقة
claim-phone_number = رقم الهاتف
claim-mobile_phone_number = رقم الهاتف المحمول
claim-phone_number_verified = تم التحقق من رقم الهاتف
claim-address = العنوان
claim-address-formatted = العنوان الكامل
claim-address-street_address = الشارع ورقم المبنى
claim-address-locality = المدينة
claim-address-region = المنطقة
claim-address-postal_code = الرمز البريدي
claim-address-country = البلد
claim-resident_address = عنوان الإقامة
claim-resident_street = الشارع
claim-resident_house_number = رقم المبنى
claim-resident_postal_code = الرمز البريدي
claim-resident_city = المدينة
claim-resident_state = الولاية أو المنطقة
claim-resident_country = بلد الإقامة
claim-updated_at = آخر تحديث
claim-nationality = الجنسية
claim-birth_place = مكان الميلاد
claim-place_of_birth = مكان الميلاد
claim-birth_country = بلد الميلاد
claim-birth_city = مدينة الميلاد
claim-family_name_birth = اسم العائلة عند الميلاد
claim-given_name_birth = الاسم الأول عند الميلاد
claim-document_number = رقم الوثيقة
claim-issuing_country = بلد الإصدار
claim-issuing_authority = جهة الإصدار
claim-issuance_date = تاريخ الإصدار
claim-issue_date = تاريخ الإصدار
claim-expiry_date = تاريخ انتهاء الصلاحية
claim-portrait = الصورة الشخصية
claim-age_over = { $age ->
    [zero] العمر { $age } عام أو أكثر
    [one] العمر عام واحد أو أكثر
    [two] العمر عامان أو أكثر
    [few] العمر { $age } أعوام أو أكثر
    [many] العمر { $age } عامًا أو أكثر
   *[other] العمر { $age } عام أو أكثر
}
