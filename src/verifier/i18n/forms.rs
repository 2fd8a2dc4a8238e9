//! Messages whose words depend on a value the page's script only learns
//! in the browser (docs/translations.md, "Counts and plurals"): a count,
//! such as the 21 of `age_over_21`, or the error code a retry is about.
//! Fluent selects their form when they are formatted, so each is handed
//! to the script in every form it can take, formatted here with the
//! value as a Fluent number or string (a plural selector works), and the
//! script picks one: by `Intl.PluralRules` for a count, by the code
//! itself otherwise, `other` when nothing fits.

use std::collections::BTreeMap;

use fluent_bundle::types::{FluentNumber, FluentNumberOptions};
use fluent_bundle::{FluentArgs, FluentValue};
use intl_pluralrules::{PluralCategory, PluralRuleType, PluralRules};

use super::Language;

/// A message whose form the script picks, and the placeable it depends
/// on.
pub struct Selected {
    pub id: &'static str,
    pub on: &'static str,
    /// Whether the placeable is a count (plural forms) or a code.
    pub count: bool,
}

/// Every message the script picks a form of.
pub const SELECTED: &[Selected] = &[
    // age_over_18, age_over_65: "Ukończone 22 lata", "Ukończone 25 lat".
    Selected {
        id: "claim-age_over",
        on: "age",
        count: true,
    },
    // What the page says while it retries, by the error it met.
    Selected {
        id: "retrying",
        on: "code",
        count: false,
    },
];

/// One message's forms in one language: for each plural category the
/// language has, or each code, the message with its placeable as
/// `{name}`; always with `other`.
#[derive(Debug, PartialEq, Eq)]
pub struct Forms {
    pub on: &'static str,
    pub count: bool,
    pub forms: BTreeMap<String, String>,
}

impl Selected {
    /// The forms of this message in `language`; `codes` are those the
    /// message may be selected by when it is not a count.
    pub fn forms(&self, language: &Language, codes: &[&str]) -> Forms {
        let mut forms = BTreeMap::new();
        let values: Vec<(String, FluentValue<'static>)> = if self.count {
            categories(language)
                .into_iter()
                .map(|(category, n)| (category.to_string(), marked(n, self.on)))
                .collect()
        } else {
            codes
                .iter()
                .chain(&["other"])
                .map(|code| (code.to_string(), FluentValue::from(code.to_string())))
                .collect()
        };
        for (key, value) in values {
            let mut args = FluentArgs::new();
            args.set(self.on, value);
            if let Some(text) = language.format(self.id, &args) {
                forms.insert(key, text);
            }
        }
        Forms {
            on: self.on,
            count: self.count,
            forms,
        }
    }
}

/// Each plural category `language` gives a whole number (CLDR's
/// cardinal rules: English one and other, Polish one, few and many,
/// Arabic all six), with the first number that has it; and `other`,
/// which every language has (Polish gives it to fractions only).
fn categories(language: &Language) -> Vec<(&'static str, f64)> {
    let mut found: Vec<(&'static str, f64)> = Vec::new();
    let Ok(rules) = PluralRules::create(language.tag.clone(), PluralRuleType::CARDINAL) else {
        return vec![("other", 0.0)];
    };
    // Every category a whole number has shows by 1000 in CLDR's rules.
    for n in (0..=1000u32).map(f64::from).chain([1.5]) {
        if let Ok(category) = rules.select(n) {
            let name = name(category);
            if !found.iter().any(|(seen, _)| *seen == name) {
                found.push((name, n));
            }
        }
    }
    found
}

/// A category's name, as `Intl.PluralRules.select` gives it.
fn name(category: PluralCategory) -> &'static str {
    match category {
        PluralCategory::ZERO => "zero",
        PluralCategory::ONE => "one",
        PluralCategory::TWO => "two",
        PluralCategory::FEW => "few",
        PluralCategory::MANY => "many",
        PluralCategory::OTHER => "other",
    }
}

/// `n`, selecting its plural form, but shown as `{name}` for the script
/// to fill in: marked in an option that only lanyard sets (a translation
/// cannot, as no `NUMBER()` function is registered), which
/// [`placeholder`] shows.
fn marked(n: f64, name: &str) -> FluentValue<'static> {
    let options = FluentNumberOptions {
        currency: Some(format!("{{{name}}}")),
        ..FluentNumberOptions::default()
    };
    FluentValue::Number(FluentNumber::new(n, options))
}

/// The bundles' formatter: a [`marked`] number as its placeable; any
/// other value as Fluent shows it.
pub(super) fn placeholder<M>(value: &FluentValue, _: &M) -> Option<String> {
    match value {
        FluentValue::Number(number) => number
            .options
            .currency
            .as_ref()
            .filter(|name| name.starts_with('{'))
            .cloned(),
        _ => None,
    }
}
