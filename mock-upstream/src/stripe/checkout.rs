//! `POST /v1/checkout/sessions`: the decoded form checked the way Stripe
//! checks it (required and unknown parameters, one currency, recurring prices
//! only in subscription mode) and turned into an open Checkout Session.
//! Unknown parameters are refused, as Stripe refuses them, so a misspelt
//! parameter fails here rather than being silently dropped.

use serde_json::{Map, Value, json};

use super::errors::ParamError;
use super::objects::{LineItem, metadata, random_id};

/// Accepted and acted on.
const KNOWN: &[&str] = &[
    "mode",
    "success_url",
    "cancel_url",
    "client_reference_id",
    "metadata",
    "line_items",
    "subscription_data",
    "customer_email",
    "customer",
    "payment_intent_data",
];
/// Accepted and ignored: they change nothing the fake models.
const IGNORED: &[&str] = &[
    "expand",
    "locale",
    "allow_promotion_codes",
    "billing_address_collection",
    "payment_method_types",
    "submit_type",
];

/// The session's inputs that completing it needs again.
#[derive(Clone, Debug)]
pub(crate) struct Draft {
    pub mode: String,
    pub items: Vec<LineItem>,
    pub subscription_metadata: Value,
    /// `customer`, when the session was created for an existing customer.
    pub customer: Option<String>,
}

/// Checks the form and builds the session object (`host` makes its `url`).
pub(crate) fn create(form: &Map<String, Value>, host: &str, now: i64) -> Result<(Value, Draft), ParamError> {
    check_keys(form, KNOWN, IGNORED, "")?;
    let mode = match form.get("mode") {
        None => return Err(ParamError::missing("mode")),
        Some(Value::String(mode)) if mode == "payment" || mode == "subscription" => mode.clone(),
        Some(_) => {
            return Err(ParamError::new(
                "Invalid mode: must be one of payment or subscription",
                "mode",
            ));
        }
    };
    let items = line_items(form.get("line_items"), &mode)?;
    let currency = items[0].currency.clone();
    let amount: i64 = items.iter().map(LineItem::amount).sum();
    let subscription_metadata = nested_metadata(form, "subscription_data")?;
    // Checked, not kept: the fake's charges do not carry it.
    nested_metadata(form, "payment_intent_data")?;
    if mode == "payment" && form.contains_key("subscription_data") {
        return Err(ParamError::new(
            "You can only pass subscription_data in subscription mode.",
            "subscription_data",
        ));
    }
    if mode == "subscription" && form.contains_key("payment_intent_data") {
        return Err(ParamError::new(
            "You can not pass payment_intent_data in subscription mode.",
            "payment_intent_data",
        ));
    }
    let text = |name: &str| -> Result<Value, ParamError> {
        match form.get(name) {
            None => Ok(Value::Null),
            Some(Value::String(s)) => Ok(Value::String(s.clone())),
            Some(_) => Err(ParamError::new(format!("Invalid string: {name}"), name)),
        }
    };
    let customer = text("customer")?;
    let id = random_id("cs_test_", 58);
    let session = json!({
        "id": id,
        "object": "checkout.session",
        "mode": mode,
        "status": "open",
        "payment_status": "unpaid",
        "amount_subtotal": amount,
        "amount_total": amount,
        "currency": currency,
        "client_reference_id": text("client_reference_id")?,
        "customer_email": text("customer_email")?,
        "metadata": metadata(form.get("metadata"), "metadata")?,
        "url": format!("http://{host}/checkout/pay/{id}"),
        "payment_intent": null,
        "subscription": null,
        "customer": customer,
        "created": now,
        "expires_at": now + 86_400,
        "livemode": false,
        "success_url": text("success_url")?,
        "cancel_url": text("cancel_url")?,
    });
    let draft = Draft {
        mode,
        items,
        subscription_metadata,
        customer: customer.as_str().map(str::to_owned),
    };
    Ok((session, draft))
}

/// `<parent>[metadata]`, the only key the fake takes under `parent`.
fn nested_metadata(form: &Map<String, Value>, parent: &str) -> Result<Value, ParamError> {
    match form.get(parent) {
        None => Ok(json!({})),
        Some(Value::Object(map)) => {
            check_keys(map, &["metadata"], &["description"], parent)?;
            metadata(map.get("metadata"), &format!("{parent}[metadata]"))
        }
        Some(_) => Err(ParamError::new(format!("Invalid object: {parent}"), parent)),
    }
}

fn line_items(value: Option<&Value>, mode: &str) -> Result<Vec<LineItem>, ParamError> {
    let items = match value {
        None => return Err(ParamError::missing("line_items")),
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(_) => return Err(ParamError::new("Invalid array: line_items", "line_items")),
    };
    let items = items
        .iter()
        .enumerate()
        .map(|(i, item)| line_item(item, &format!("line_items[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    if items.iter().any(|item| item.currency != items[0].currency) {
        return Err(ParamError::new(
            "All line items must use the same currency.",
            "line_items",
        ));
    }
    let recurring = items.iter().any(|item| item.interval.is_some());
    if mode == "subscription" && !recurring {
        return Err(ParamError::new(
            "You must provide at least one recurring price in `subscription` mode when using prices.",
            "line_items",
        ));
    }
    if mode == "payment" && recurring {
        return Err(ParamError::new(
            "You specified `payment` mode but passed a recurring price. Either switch to `subscription` mode or use only one-time prices.",
            "line_items",
        ));
    }
    Ok(items)
}

fn line_item(item: &Value, at: &str) -> Result<LineItem, ParamError> {
    let item = item
        .as_object()
        .ok_or_else(|| ParamError::new(format!("Invalid object: {at}"), at))?;
    check_keys(item, &["price_data", "quantity"], &[], at)?;
    let price = match item.get("price_data") {
        Some(Value::Object(price)) => price,
        Some(_) => {
            return Err(ParamError::new(
                format!("Invalid object: {at}[price_data]"),
                format!("{at}[price_data]"),
            ));
        }
        None => return Err(ParamError::missing(&format!("{at}[price_data]"))),
    };
    let at_price = format!("{at}[price_data]");
    check_keys(
        price,
        &["currency", "unit_amount", "product_data", "recurring"],
        &["tax_behavior"],
        &at_price,
    )?;
    let currency = string(price, "currency", &at_price)?.to_ascii_lowercase();
    if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(ParamError::new(
            format!("Invalid currency: {currency}"),
            format!("{at_price}[currency]"),
        ));
    }
    let unit_amount = integer(price, "unit_amount", &at_price, 0)?;
    match price.get("product_data") {
        Some(Value::Object(product)) => {
            let at_product = format!("{at_price}[product_data]");
            check_keys(product, &["name"], &["description", "images", "metadata"], &at_product)?;
            string(product, "name", &at_product)?;
        }
        _ => return Err(ParamError::missing(&format!("{at_price}[product_data]"))),
    }
    let interval = match price.get("recurring") {
        None => None,
        Some(Value::Object(recurring)) => {
            let at_recurring = format!("{at_price}[recurring]");
            check_keys(recurring, &["interval"], &["interval_count"], &at_recurring)?;
            let interval = string(recurring, "interval", &at_recurring)?;
            if !matches!(interval.as_str(), "day" | "week" | "month" | "year") {
                return Err(ParamError::new(
                    "Invalid interval: must be one of day, week, month, or year",
                    format!("{at_recurring}[interval]"),
                ));
            }
            Some(interval)
        }
        Some(_) => return Err(ParamError::new("Invalid object", format!("{at_price}[recurring]"))),
    };
    Ok(LineItem {
        unit_amount,
        quantity: integer(item, "quantity", at, 1)?,
        currency,
        interval,
    })
}

/// Refuses keys outside `known` and `ignored`, naming them as Stripe does.
fn check_keys(map: &Map<String, Value>, known: &[&str], ignored: &[&str], at: &str) -> Result<(), ParamError> {
    for key in map.keys() {
        if !known.contains(&key.as_str()) && !ignored.contains(&key.as_str()) {
            let name = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}[{key}]")
            };
            return Err(ParamError::unknown(&name));
        }
    }
    Ok(())
}

fn string(map: &Map<String, Value>, key: &str, at: &str) -> Result<String, ParamError> {
    match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(_) => Err(ParamError::new(
            format!("Invalid string: {at}[{key}]"),
            format!("{at}[{key}]"),
        )),
        None => Err(ParamError::missing(&format!("{at}[{key}]"))),
    }
}

/// A required whole number of at least `min`.
fn integer(map: &Map<String, Value>, key: &str, at: &str, min: i64) -> Result<i64, ParamError> {
    let param = format!("{at}[{key}]");
    match map.get(key) {
        None => Err(ParamError::missing(&param)),
        Some(Value::String(s)) => match s.parse::<i64>() {
            Ok(n) if n >= min && n <= 99_999_999 => Ok(n),
            Ok(_) => Err(ParamError::new(
                format!("Invalid integer: {param} must be between {min} and 99999999"),
                param,
            )),
            Err(_) => Err(ParamError::new(format!("Invalid integer: {s}"), param)),
        },
        Some(_) => Err(ParamError::new(format!("Invalid integer: {param}"), param)),
    }
}
