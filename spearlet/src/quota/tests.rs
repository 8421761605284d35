use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use spear_proto::quota::OnUnreachable;
use spear_proto::v1::{QuotaKey, QuotaMeter, Rate, TakeQuotaRequest, TakeQuotaResponse};

use super::{NodeQuotas, QuotaRefused, TakeFailed, Taker};

/// SMS's side in miniature: one window, a limit, slices of `slice` units;
/// every request is kept so a test sees what the node told SMS.
struct Window {
    max: u64,
    slice: u64,
    used: Mutex<u64>,
    asked: Mutex<Vec<TakeQuotaRequest>>,
    reachable: Mutex<bool>,
    unlimited: bool,
    /// What SMS says the slice lasts until (0: the window).
    slice_until: Mutex<u64>,
}

impl Window {
    fn new(max: u64, slice: u64) -> Arc<Window> {
        Arc::new(Window {
            max,
            slice,
            used: Mutex::new(0),
            asked: Mutex::default(),
            reachable: Mutex::new(true),
            unlimited: false,
            slice_until: Mutex::new(0),
        })
    }
}

#[async_trait]
impl Taker for Window {
    async fn take(&self, request: TakeQuotaRequest) -> Result<TakeQuotaResponse, TakeFailed> {
        if !*self.reachable.lock() {
            return Err(TakeFailed::Unreachable(
                "SMS is unreachable (connection refused)".into(),
            ));
        }
        self.asked.lock().push(request.clone());
        let refill_at_ms = spear_common::clock::now_ms() + 60_000;
        if self.unlimited {
            return Ok(TakeQuotaResponse {
                unlimited: true,
                refill_at_ms,
                ..TakeQuotaResponse::default()
            });
        }
        let mut used = self.used.lock();
        *used += request.spent;
        let granted = match request.settle {
            true => 0,
            false => self.slice.min(self.max.saturating_sub(*used)),
        };
        *used += granted;
        Ok(TakeQuotaResponse {
            granted,
            rate: Some(Rate {
                max: self.max,
                per_ms: 60_000,
            }),
            used: *used,
            refill_at_ms,
            unlimited: false,
            slice_until_ms: *self.slice_until.lock(),
        })
    }
}

fn none() -> bytes::Bytes {
    bytes::Bytes::new()
}

fn key(meter: QuotaMeter) -> QuotaKey {
    QuotaKey {
        meter: meter as i32,
        id: "notes".into(),
        ..QuotaKey::default()
    }
}

#[tokio::test]
async fn calls_spend_the_slice_locally_and_ask_again_only_when_it_is_empty() {
    let sms = Window::new(10, 4);
    let quotas = NodeQuotas::new("node-a", sms.clone());
    let calls = key(QuotaMeter::TaskToolCalls);
    for _ in 0..10 {
        quotas
            .take(&calls, OnUnreachable::Refuse, true, &none())
            .await
            .unwrap();
    }
    assert_eq!(sms.asked.lock().len(), 3, "slices of 4, 4 and 2");
    let refused = quotas
        .take(&calls, OnUnreachable::Refuse, true, &none())
        .await
        .unwrap_err();
    let said = refused.to_string();
    assert!(said.starts_with("task 'notes' has used its quota of 10 tool calls per 1m (quota.tool_calls); it refills at "), "{said}");
    assert_eq!(sms.asked.lock().len(), 4, "the fourth ask found it spent");
    for _ in 0..100 {
        assert!(quotas
            .take(&calls, OnUnreachable::Refuse, true, &none())
            .await
            .is_err());
    }
    assert_eq!(
        sms.asked.lock().len(),
        4,
        "a spent quota is refused without asking SMS until it refills"
    );
    assert_eq!(quotas.stats.refused_spent.load(Ordering::Relaxed), 101);
}

#[tokio::test]
async fn an_unreachable_sms_refuses_unless_the_quota_allows() {
    let sms = Window::new(10, 4);
    *sms.reachable.lock() = false;
    let quotas = NodeQuotas::new("node-a", sms.clone());
    let calls = key(QuotaMeter::ServerCalls);
    let refused = quotas
        .take(&calls, OnUnreachable::Refuse, true, &none())
        .await
        .unwrap_err();
    assert!(matches!(refused, QuotaRefused::Unreachable { .. }));
    let said = refused.to_string();
    assert!(
        said.contains("server 'notes''s quota (the server file's quota.calls) could not be counted: SMS is unreachable (connection refused); its on_unreachable is \"refuse\""),
        "{said}"
    );
    quotas
        .take(&calls, OnUnreachable::Allow, true, &none())
        .await
        .unwrap();
    assert_eq!(quotas.stats.allowed_uncounted.load(Ordering::Relaxed), 1);
    *sms.reachable.lock() = true;
    quotas
        .take(&calls, OnUnreachable::Refuse, true, &none())
        .await
        .unwrap();
}

#[tokio::test]
async fn tokens_are_spent_after_the_request_and_what_the_slice_missed_is_told() {
    let sms = Window::new(1_000, 100);
    let quotas = NodeQuotas::new("node-a", sms.clone());
    let tokens = key(QuotaMeter::TaskModelTokens);
    quotas
        .take(&tokens, OnUnreachable::Refuse, false, &none())
        .await
        .unwrap();
    // A request used 250 tokens: 100 from the slice, 150 told to SMS.
    quotas.spend(&tokens, 250, &none()).await;
    let asked = sms.asked.lock().clone();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[1].spent, 150);
    assert_eq!(*sms.used.lock(), 350, "250 used and a fresh slice of 100");
    // Spending past the limit is counted, and the next request is refused.
    quotas.spend(&tokens, 900, &none()).await;
    assert_eq!(
        *sms.used.lock(),
        1_150,
        "what was used is counted even past the limit"
    );
    let refused = quotas
        .take(&tokens, OnUnreachable::Refuse, false, &none())
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("quota of 1000 model tokens per 1m (quota.model_tokens)"),
        "{refused}"
    );
}

#[tokio::test]
async fn tokens_spent_while_sms_is_unreachable_are_told_later() {
    let sms = Window::new(1_000, 100);
    let quotas = NodeQuotas::new("node-a", sms.clone());
    let tokens = key(QuotaMeter::TaskModelTokens);
    quotas
        .take(&tokens, OnUnreachable::Refuse, false, &none())
        .await
        .unwrap();
    *sms.reachable.lock() = false;
    quotas.spend(&tokens, 130, &none()).await;
    *sms.reachable.lock() = true;
    quotas
        .take(&tokens, OnUnreachable::Refuse, false, &none())
        .await
        .unwrap();
    assert_eq!(sms.asked.lock().last().map(|r| r.spent), Some(30));
}

#[tokio::test]
async fn a_quota_sms_does_not_hold_is_not_counted() {
    let sms = Arc::new(Window {
        unlimited: true,
        ..Arc::try_unwrap(Window::new(1, 1)).ok().unwrap()
    });
    let quotas = NodeQuotas::new("node-a", sms.clone());
    let calls = key(QuotaMeter::TaskToolCalls);
    for _ in 0..50 {
        quotas
            .take(&calls, OnUnreachable::Refuse, true, &none())
            .await
            .unwrap();
    }
    assert_eq!(sms.asked.lock().len(), 1);
}

/// An SMS answering nothing granted and no rate (a broken or hostile
/// one): the call is refused, never spent from an empty slice.
struct Stingy;

#[async_trait]
impl Taker for Stingy {
    async fn take(&self, _: TakeQuotaRequest) -> Result<TakeQuotaResponse, TakeFailed> {
        Ok(TakeQuotaResponse {
            refill_at_ms: spear_common::clock::now_ms() + 60_000,
            ..TakeQuotaResponse::default()
        })
    }
}

#[tokio::test]
async fn an_answer_without_units_or_rate_refuses_the_call() {
    let quotas = NodeQuotas::new("node-a", Arc::new(Stingy));
    let calls = key(QuotaMeter::TaskToolCalls);
    for _ in 0..3 {
        let refused = quotas
            .take(&calls, OnUnreachable::Refuse, true, &none())
            .await;
        assert!(
            matches!(refused, Err(QuotaRefused::Spent(_))),
            "{refused:?}"
        );
    }
}

#[tokio::test]
async fn every_take_says_what_the_last_slice_used_and_an_expired_slice_goes_back() {
    let sms = Window::new(100, 4);
    let quotas = NodeQuotas::new("node-a", sms.clone());
    let calls = key(QuotaMeter::TaskToolCalls);
    for _ in 0..8 {
        quotas
            .take(&calls, OnUnreachable::Refuse, true, &none())
            .await
            .unwrap();
    }
    let used: Vec<u64> = sms.asked.lock().iter().map(|r| r.used).collect();
    assert_eq!(
        used,
        [0, 4],
        "the second take settles the first slice, all used"
    );
    // A slice SMS says has already ended: one unit spent at once, then
    // the rest are not spent, and the next take says one was used.
    *sms.slice_until.lock() = 1;
    quotas
        .take(&calls, OnUnreachable::Refuse, true, &none())
        .await
        .unwrap();
    quotas
        .take(&calls, OnUnreachable::Refuse, true, &none())
        .await
        .unwrap();
    let asked = sms.asked.lock().clone();
    assert_eq!(asked.len(), 4, "the expired slice was not spent from");
    assert_eq!(asked[3].used, 1);
}

#[tokio::test]
async fn a_per_principal_take_carries_the_runs_delegation_and_no_other_does() {
    let sms = Window::new(100, 4);
    let quotas = NodeQuotas::new("node-a", sms.clone());
    let sealed = bytes::Bytes::from_static(b"sealed by SMS");
    let alice = QuotaKey {
        principal: "https://idp#alice".into(),
        ..key(QuotaMeter::TaskToolCalls)
    };
    quotas
        .take(&alice, OnUnreachable::Refuse, true, &sealed)
        .await
        .unwrap();
    quotas
        .take(
            &key(QuotaMeter::ServerCalls),
            OnUnreachable::Refuse,
            true,
            &sealed,
        )
        .await
        .unwrap();
    let asked = sms.asked.lock().clone();
    assert_eq!(asked[0].delegation, sealed);
    assert!(
        asked[1].delegation.is_empty(),
        "shown only where a principal is counted"
    );
}

#[tokio::test]
async fn a_slice_that_ended_unspent_is_settled_and_a_spent_one_is_not() {
    let sms = Window::new(100, 4);
    *sms.slice_until.lock() = 1;
    let quotas = NodeQuotas::new("node-a", sms.clone());
    let calls = key(QuotaMeter::TaskToolCalls);
    quotas
        .take(&calls, OnUnreachable::Refuse, true, &none())
        .await
        .unwrap();
    assert_eq!(quotas.settle_ended().await, 1);
    let settle = sms.asked.lock().last().cloned().unwrap();
    assert!(settle.settle);
    assert_eq!(settle.used, 1, "one of the slice's 4 units was used");
    assert_eq!(quotas.settle_ended().await, 0, "settled once");
    // The next take has nothing left to say of that slice.
    quotas
        .take(&calls, OnUnreachable::Refuse, true, &none())
        .await
        .unwrap();
    assert_eq!(sms.asked.lock().last().map(|r| r.used), Some(0));
}
