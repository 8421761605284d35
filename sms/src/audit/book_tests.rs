//! The book's unit tests: shipping, disputes, retention and verify.
use super::*;

fn lines(node: &str, n: u64) -> Vec<AuditLine> {
    let mut prev = String::new();
    (1..=n)
        .map(|seq| {
            let mut record = Record {
                node: node.into(),
                task: "fs-agent".into(),
                tool: "read_file".into(),
                time_ms: now_ms(),
                ..Record::default()
            };
            let json = record.seal(seq, &prev);
            prev = record.hash;
            AuditLine { seq, json }
        })
        .collect()
}

#[test]
fn a_shipment_sent_twice_is_kept_once_and_verifies() {
    let book = AuditBook::default();
    let batch = lines("n1", 10);
    let first = book.ship("n1", batch.clone()).unwrap();
    assert_eq!(
        (first.stored, first.duplicates, first.new.len()),
        (10, 0, 10)
    );
    let again = book.ship("n1", batch).unwrap();
    assert_eq!(
        (again.stored, again.duplicates, again.new.len()),
        (0, 10, 0)
    );
    let (found, _) = book.query(&QueryAuditRequest {
        task_id: "fs-agent".into(),
        ..Default::default()
    });
    assert_eq!(found.len(), 10);
    let reports = book.verify();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].problem, "");
}

/// A peer ships seq 2..3 as n1 before n1 does: n1's own records are
/// kept beside the forged ones (not dropped as duplicates), a query shows
/// both copies, `verify` names the seqs, and an admin keeping the node's
/// copies makes the chain whole again.
#[test]
fn records_pre_empted_under_a_nodes_name_are_kept_beside_until_resolved() {
    let book = AuditBook::default();
    let real = lines("n1", 3);
    let mut forged = lines("n1", 3);
    for line in &mut forged {
        line.json = line.json.replace("read_file", "delete_file");
    }
    let first = book.ship("n1", forged[1..].to_vec()).unwrap();
    assert_eq!(first.stored, 2);
    let second = book.ship("n1", real.clone()).unwrap();
    assert_eq!(
        (second.stored, second.duplicates, second.conflicts),
        (1, 0, 2)
    );
    let report = &book.verify()[0];
    assert!(
        report
            .problem
            .contains("2 seq(s) were offered under this node's name"),
        "{report:?}"
    );
    let (found, _) = book.query(&QueryAuditRequest::default());
    let shown: Vec<(u64, u32, bool)> = found
        .iter()
        .map(|f| (f.line.seq, f.copy, f.line.json.contains("delete_file")))
        .collect();
    assert_eq!(
        shown,
        [
            (1, 0, false),
            (2, 0, true),
            (2, 1, false),
            (3, 0, true),
            (3, 1, false)
        ]
    );
    // The same records again are duplicates, not new conflicts.
    let again = book.ship("n1", real.clone()).unwrap();
    assert_eq!((again.duplicates, again.conflicts), (3, 0));
    // A copy nobody offered is not kept; the node's own are.
    let unknown = book.resolve("n1", 2, &"0".repeat(64)).unwrap_err();
    assert!(
        matches!(unknown, AuditError::NoSuchCopy { .. }),
        "{unknown}"
    );
    for line in &real[1..] {
        let keep = conflicts::offered_hash(&line.json);
        let resolved = book.resolve("n1", line.seq, &keep).unwrap();
        assert_eq!(
            resolved,
            Resolved {
                dropped: 1,
                replaced: true
            }
        );
    }
    assert_eq!(book.verify()[0].problem, "");
    let (found, _) = book.query(&QueryAuditRequest::default());
    assert!(found.iter().all(|f| f.copy == 0 && f.sha256.is_empty()));
    assert!(matches!(
        book.resolve("n1", 2, "x"),
        Err(AuditError::NotDisputed { seq: 2, .. })
    ));
    // Resolving for a node SMS never heard of makes no chain of it.
    assert!(book.resolve("nobody", 1, "x").is_err());
    assert_eq!(book.verify().len(), 1);
}

#[test]
fn a_record_altered_or_naming_another_node_is_refused_or_named() {
    let book = AuditBook::default();
    let mut batch = lines("n1", 5);
    batch[3].json = batch[3].json.replace("read_file", "write_file");
    book.ship("n1", batch).unwrap();
    // A node shipping another node's records is refused at the door.
    let refused = book.ship("n2", lines("n3", 2)).unwrap_err();
    assert!(
        matches!(refused, AuditError::OtherNode { seq: 1, .. }),
        "{refused}"
    );
    let reports = book.verify();
    assert_eq!(reports.len(), 1);
    assert_eq!(
        reports[0].problem,
        "record 4 was altered: its hash does not match its contents"
    );
}

#[test]
fn retention_keeps_the_newest_and_the_chain_verifies_from_there() {
    let book = AuditBook::new(Retention {
        max_age: Duration::from_secs(3600),
        max_records: 4,
    });
    book.ship("n1", lines("n1", 10)).unwrap();
    let reports = book.verify();
    assert_eq!((reports[0].first_seq, reports[0].records), (7, 4));
    assert_eq!(reports[0].problem, "");
    // Past the cap across nodes, the oldest go first, whoever shipped.
    book.ship("n2", lines("n2", 2)).unwrap();
    let reports = book.verify();
    let held: Vec<(u64, u64)> = reports.iter().map(|r| (r.first_seq, r.records)).collect();
    assert_eq!(held, [(9, 2), (1, 2)], "{reports:?}");
}
