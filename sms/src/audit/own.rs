//! What a shipment may carry: at most [`MAX_SHIPMENT`] records of at most
//! [`MAX_RECORD`] bytes, each an audit record of the shipping node itself,
//! at the seq it says. A node with valid credentials could otherwise
//! store records under its name that claim another node's actions, which
//! only `verify` would notice, long after an operator read them.

use std::borrow::Cow;

use spear_proto::v1::AuditLine;

use super::{AuditError, MAX_RECORD, MAX_SHIPMENT};

/// The two fields of a record the check reads (the rest is not parsed).
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    node: Cow<'a, str>,
    #[serde(default)]
    seq: u64,
}

/// Refuses a shipment from `caller` too large to keep, or carrying a
/// record that is not `caller`'s own at its seq.
pub fn check_shipment(caller: &str, records: &[AuditLine]) -> Result<(), AuditError> {
    if records.len() > MAX_SHIPMENT {
        return Err(AuditError::TooMany(records.len()));
    }
    for line in records {
        if line.json.len() > MAX_RECORD {
            return Err(AuditError::TooLarge {
                seq: line.seq,
                len: line.json.len(),
            });
        }
        let head: Head = serde_json::from_str(&line.json)
            .map_err(|_| AuditError::NotARecord { seq: line.seq })?;
        if head.node != caller {
            return Err(AuditError::OtherNode {
                seq: line.seq,
                named: spear_common::text::printable(spear_common::text::prefix(&head.node, 64))
                    .into_owned(),
                caller: caller.to_string(),
            });
        }
        if head.seq != line.seq {
            return Err(AuditError::WrongSeq {
                seq: line.seq,
                says: head.seq,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, json: &str) -> AuditLine {
        AuditLine {
            seq,
            json: json.into(),
        }
    }

    #[test]
    fn only_the_callers_own_records_at_their_seq_pass() {
        let own = line(3, r#"{"v":1,"node":"n1","seq":3,"tool":"x"}"#);
        assert_eq!(check_shipment("n1", std::slice::from_ref(&own)), Ok(()));
        let other = line(4, r#"{"v":1,"node":"n2","seq":4}"#);
        let refused = check_shipment("n1", &[own.clone(), other]).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "record 4 names node 'n2', but the shipment comes from node 'n1': a node ships only its own records"
        );
        let moved = line(5, r#"{"v":1,"node":"n1","seq":9}"#);
        assert!(matches!(
            check_shipment("n1", &[moved]),
            Err(AuditError::WrongSeq { seq: 5, says: 9 })
        ));
        let garbage = line(6, "not json");
        assert!(matches!(
            check_shipment("n1", &[garbage]),
            Err(AuditError::NotARecord { seq: 6 })
        ));
        let sneaky = line(7, "{\"node\":\"n2\\u001b[2J\",\"seq\":7}");
        let said = check_shipment("n1", &[sneaky]).unwrap_err().to_string();
        assert!(!said.contains('\u{1b}'), "{said}");
    }
}
