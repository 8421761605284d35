//! Helpers shared by the end-to-end tests and benchmarks: starting the real
//! `sms` and `spearlet` binaries and a real etcd, and waiting for what they
//! should eventually show.

pub mod certs;
pub mod etcd;
pub mod fixtures;
pub mod history;
pub mod http;
pub mod peers;
pub mod procs;
pub mod tasks;
pub mod wait;
