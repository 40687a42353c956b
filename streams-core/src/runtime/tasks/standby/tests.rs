//! Standby tasks against a real broker: one thread's task manager keeps task 0_0 of a
//! topology with a logged RocksDB store as a standby while records are written to the
//! store's (fresh) changelog, then promotes it, or removes it.
//!
//! Without a broker the tests say they were skipped (`scripts/test.sh` always provides one).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, Producer};
use streams_state::StoreError;
use streams_test_utils::kafka::{self, ProduceRecord};

use crate::engine::TaskStore;
use crate::metrics::{Metrics, RecordingLevel};
use crate::model::TaskId;
use crate::model::error::StreamsError;
use crate::runtime::client::protocol::GroupProtocol;
use crate::runtime::status::Status;
use crate::runtime::tasks::TaskManager;
use crate::runtime::thread::ThreadContext;
use crate::runtime::thread::factory::ThreadFactory;
use crate::serdes::{StringSerde, U64Serde};
use crate::{KvStore, ProcessResult, Processor, ProcessorContext, Record, Stores, StreamsConfig, Topology};

const TASK: TaskId = TaskId {
    subtopology: 0,
    partition: 0,
};
const THREAD: &str = "standby-test-thread";
const WAIT: Duration = Duration::from_secs(60);

/// Holds the store `counts`; never gets a record in the tests that use it.
#[derive(Default)]
pub(crate) struct Hold {
    store: Option<KvStore<StringSerde, U64Serde>>,
}

impl Processor<String, String, String, u64> for Hold {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, u64>) -> ProcessResult {
        self.store = Some(ctx.kv_store("counts")?);
        Ok(())
    }
    fn process(
        &mut self,
        _ctx: &mut ProcessorContext<'_, String, u64>,
        _r: Record<String, String>,
    ) -> ProcessResult {
        Ok(())
    }
}

/// A fresh application: its input topic and the changelog of its store `counts`, one
/// partition each, and a thread's task manager with its (never polled) main consumer.
pub(crate) struct Setup {
    pub(crate) bootstrap: String,
    app_id: String,
    pub(crate) input: String,
    changelog: String,
    factory: Arc<ThreadFactory>,
    pub(crate) tm: TaskManager,
    pub(crate) consumer: crate::runtime::client::oauth::Authenticated<BaseConsumer<ThreadContext>>,
    state: tempfile::TempDir,
    /// The changelog as written so far: key -> value (`None` once deleted).
    model: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The records of [`write`](Self::write), by offset.
    log: Vec<ProduceRecord>,
    written: u64,
}

/// Closes the consumer as a stream thread does when its loop ends: marked closing (an
/// assignment its group delivers while it leaves creates nothing and looks up no offsets:
/// the lookup would wait out the recovery limit on a consumer that is closing) and
/// unsubscribed.
impl Drop for Setup {
    fn drop(&mut self) {
        self.consumer
            .context()
            .closing
            .store(true, std::sync::atomic::Ordering::Relaxed);
        crate::runtime::group::rebalance::leave_group(&self.consumer, true);
    }
}

impl Setup {
    pub(crate) fn new(test: &str, eos: bool) -> Option<Self> {
        let bootstrap = kafka::require_kafka(test)?;
        let app_id = kafka::unique_name("standby");
        let input = kafka::unique_name("standby-in");
        let changelog = format!("{app_id}-counts-changelog");
        kafka::create_topic(&bootstrap, &input, 1, &[]).unwrap();
        // `delete` too: the gap test deletes records (DeleteRecords refuses compact-only topics).
        kafka::create_topic(&bootstrap, &changelog, 1, &[("cleanup.policy", "compact,delete")]).unwrap();
        let state = tempfile::tempdir().unwrap();
        let config = StreamsConfig::from_properties([
            ("application.id", app_id.clone()),
            ("bootstrap.servers", bootstrap.clone()),
            ("state.dir", state.path().display().to_string()),
            (
                "processing.guarantee",
                if eos { "exactly_once_v2" } else { "at_least_once" }.to_owned(),
            ),
        ])
        .unwrap();
        let mut b = Topology::builder();
        b.add_source("src", [input.as_str()], StringSerde, StringSerde)
            .add_processor("hold", Hold::default, ["src"])
            .add_state_store(Stores::persistent_kv("counts", StringSerde, U64Serde), ["hold"]);
        let topology = Arc::new(b.build().unwrap());
        let metrics = Metrics::new(&app_id, RecordingLevel::Info).unwrap();
        let factory = Arc::new(ThreadFactory {
            metrics: metrics.clone(),
            topology,
            config: Arc::new(config),
            status: Arc::new(Status::new(metrics)),
            bootstrap: bootstrap.clone(),
            process_id: kafka::unique_name("process"),
            on_mock: false,
            group_protocol: GroupProtocol::Classic,
            group_topology: None,
            group_security: Default::default(),
            offset_sums: Arc::new(crate::runtime::restore::offset_sums::OffsetSums::load(
                &state.path().join(&app_id),
            )),
            rocksdb: streams_state::RocksDbResources::default(),
            hosting: Arc::default(),
            group_endpoints: Arc::default(),
            purger: None,
            repartition_topics: Arc::default(),
        });
        let (consumer, parts, _) = factory.parts(THREAD, 0).unwrap();
        let tm = TaskManager::new(parts).unwrap();
        Some(Self {
            bootstrap,
            app_id,
            input,
            changelog,
            factory,
            tm,
            consumer,
            state,
            model: BTreeMap::new(),
            log: Vec::new(),
            written: 0,
        })
    }

    /// Writes `n` changelog records over 50 keys; every 7th is a delete.
    fn write(&mut self, n: u64) {
        let records: Vec<ProduceRecord> = self
            .next_records(n)
            .into_iter()
            .map(|(k, v)| match v {
                Some(v) => ProduceRecord::new(k, v),
                None => ProduceRecord::tombstone(k),
            })
            .collect();
        kafka::produce(&self.bootstrap, &self.changelog, &records, WAIT).unwrap();
        self.add_to_model(&records);
        self.log.extend(records);
    }

    /// Writes `n` changelog records as [`write`](Self::write) does, in one transaction,
    /// which commits or aborts.
    pub(crate) fn write_transaction(&mut self, n: u64, commit: bool) {
        let producer = kafka::transactional_producer(&self.bootstrap, "standby-txn", &[]).unwrap();
        producer.begin_transaction().unwrap();
        let records = self.next_records(n);
        for (k, v) in &records {
            let mut r = BaseRecord::<[u8], [u8]>::to(&self.changelog).key(k).partition(0);
            if let Some(v) = v {
                r = r.payload(v);
            }
            producer.send(r).map_err(|(e, _)| e).unwrap();
        }
        if commit {
            producer.commit_transaction(WAIT).unwrap();
            let records: Vec<ProduceRecord> = records
                .into_iter()
                .map(|(k, v)| match v {
                    Some(v) => ProduceRecord::new(k, v),
                    None => ProduceRecord::tombstone(k),
                })
                .collect();
            self.add_to_model(&records);
        } else {
            producer.flush(WAIT).unwrap();
            producer.abort_transaction(WAIT).unwrap();
        }
    }

    /// The next `n` records: (key, value or `None` for a delete).
    fn next_records(&mut self, n: u64) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let records = (self.written..self.written + n)
            .map(|i| {
                let key = format!("key-{}", i % 50).into_bytes();
                (key, (i % 7 != 6).then(|| i.to_be_bytes().to_vec()))
            })
            .collect();
        self.written += n;
        records
    }

    fn add_to_model(&mut self, records: &[ProduceRecord]) {
        for r in records {
            if let Some(k) = &r.key {
                self.model.insert(k.clone(), r.value.clone());
            }
        }
    }

    /// Makes the standby task active (a cooperative assignment of its input partition) and
    /// waits until it runs; returns how many records the standby applied in all and how many
    /// the restoration applied.
    fn promote(&mut self) -> (u64, u64) {
        let standby = self.standby_counter();
        self.tm.set_pending_cooperative(&self.assignment());
        self.finish_promotion(&standby)
    }

    /// The task's input partition.
    pub(crate) fn assignment(&self) -> TopicPartitionList {
        let mut assignment = TopicPartitionList::new();
        assignment.add_partition(&self.input, 0);
        assignment
    }

    /// The standby's counter, which its series' removal at promotion leaves readable.
    fn standby_counter(&self) -> prometheus::IntCounter {
        let l = self.labels();
        self.factory
            .metrics
            .families()
            .task_standby_records
            .with_label_values(&[&l[0], &l[1], &l[2]])
    }

    /// Creates the pending assignment, which promotes the standby, and waits until the task
    /// runs.
    fn finish_promotion(&mut self, standby: &prometheus::IntCounter) -> (u64, u64) {
        self.tm.create_pending(&self.consumer).unwrap();
        assert!(self.tm.standby_ids().is_empty(), "an active task is no standby");
        assert!(self.tm.is_restoring());
        self.run_restored();
        (standby.get(), self.restored_records())
    }

    /// Waits until no task restores, then checks that the task runs and opens its
    /// transaction, as the stream thread does before it processes.
    pub(crate) fn run_restored(&mut self) {
        let deadline = Instant::now() + WAIT;
        while self.tm.is_restoring() {
            assert!(Instant::now() < deadline, "still restoring after {WAIT:?}");
            self.tm.take_restored(&self.consumer).unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(self.tm.tasks.contains_key(&TASK), "the task runs");
        self.tm.begin_transaction().unwrap();
    }

    fn labels(&self) -> [String; 3] {
        [self.app_id.clone(), THREAD.to_owned(), TASK.to_string()]
    }

    /// The standby's applied-records counter.
    fn standby_records(&self) -> u64 {
        let l = self.labels();
        let f = self.factory.metrics.families();
        f.task_standby_records
            .with_label_values(&[&l[0], &l[1], &l[2]])
            .get()
    }

    /// The task's restored-records counter.
    pub(crate) fn restored_records(&self) -> u64 {
        let l = self.labels();
        let f = self.factory.metrics.families();
        f.task_restore_records
            .with_label_values(&[&l[0], &l[1], &l[2]])
            .get()
    }

    /// Waits until the standby has applied `n` records and reports no lag.
    /// Takes the updater's reports meanwhile, as the stream thread's loop does.
    fn wait_applied(&mut self, n: u64) {
        let deadline = Instant::now() + WAIT;
        let l = self.labels();
        let lag = |s: &Self| {
            s.factory
                .metrics
                .families()
                .task_standby_lag
                .with_label_values(&[&l[0], &l[1], &l[2]])
                .get()
        };
        while self.standby_records() < n || lag(self) != 0 {
            assert!(
                Instant::now() < deadline,
                "standby applied {} of {n} records (lag {}) after {WAIT:?}",
                self.standby_records(),
                lag(self)
            );
            self.tm.take_restored(&self.consumer).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(self.standby_records(), n, "the standby applied every record once");
    }

    fn task_dir(&self) -> PathBuf {
        self.state.path().join(&self.app_id).join(TASK.to_string())
    }

    /// The task's stores, opened from its state directory once nothing holds it.
    fn open_stores(&self) -> Vec<TaskStore> {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.tm.settings.factory.stores(TASK, &self.task_dir(), None) {
                Err(StreamsError::Store(StoreError::Locked { .. })) => {
                    assert!(
                        Instant::now() < deadline,
                        "state directory still locked after {WAIT:?}"
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other.unwrap(),
            }
        }
    }

    /// Asserts that the store `counts` holds exactly the model of the changelog, and
    /// returns its checkpoint.
    fn check_store(&self) -> Option<i64> {
        let mut stores = self.open_stores();
        let store = &mut stores[0].store;
        let held: BTreeMap<Vec<u8>, Vec<u8>> = store
            .all()
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()
            .unwrap();
        let expected: BTreeMap<Vec<u8>, Vec<u8>> = self
            .model
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect();
        assert_eq!(held, expected, "the store holds the changelog's latest values");
        let checkpoint = store.checkpoint().unwrap();
        store.close().unwrap();
        checkpoint
    }
}

/// A standby catches up with its changelog and follows it; promoted, the task restores only
/// what the standby had not applied, and its store equals the whole changelog.
#[test]
fn a_standby_follows_its_changelog_and_a_promotion_restores_only_the_rest() {
    let Some(mut s) = Setup::new("standby promotion", false) else {
        return;
    };
    s.write(1_000);
    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    assert_eq!(s.tm.standby_ids(), BTreeSet::from([TASK]));
    s.wait_applied(1_000);
    s.write(500);
    s.wait_applied(1_500);

    // Written just before the promotion: the standby may or may not see some of them.
    s.write(300);
    // The assignment makes it active and no longer a standby: it stays until promoted.
    let standby = s.standby_counter();
    s.tm.set_pending_cooperative(&s.assignment());
    s.tm.set_standbys(&BTreeSet::new()).unwrap();
    assert_eq!(s.tm.standby_ids(), BTreeSet::from([TASK]));
    let (applied, restored) = s.finish_promotion(&standby);
    println!("the standby applied {applied} records, the promotion restored {restored}");
    assert!(
        restored <= 300,
        "restoration applied {restored} records; the standby had all but the last 300"
    );
    assert_eq!(applied + restored, 1_800, "every record applied once");
    // Running, the task is caught up by definition: the member does not report it.
    let sums = s.factory.offset_sums.clone();
    assert!(!sums.snapshot().contains_key(&TASK), "{:?}", sums.snapshot());
    assert!(sums.end_snapshot().is_empty(), "{:?}", sums.end_snapshot());
    // Asked for again while active: no standby.
    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    assert!(s.tm.standby_ids().is_empty());

    s.tm.close(&s.consumer, true).unwrap();
    assert_eq!(
        s.check_store(),
        Some(1_799),
        "checkpointed at the changelog's end"
    );
    assert_eq!(
        sums.snapshot(),
        BTreeMap::from([(TASK, 1_799)]),
        "closed, it is reported"
    );
}

/// Removing a standby checkpoints its stores and keeps them; a later standby of the task
/// applies only what came after.
#[test]
fn a_removed_standby_keeps_its_checkpointed_state() {
    let Some(mut s) = Setup::new("standby removal", false) else {
        return;
    };
    s.write(700);
    let gauge = s
        .factory
        .metrics
        .families()
        .thread_standby_tasks
        .with_label_values(&[&s.app_id, THREAD]);
    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    assert_eq!(gauge.get(), 1, "streams_thread_standby_tasks");
    s.wait_applied(700);
    // What the member reports (`TaskEndOffsets`): where the followed changelog ends.
    let sums = s.factory.offset_sums.clone();
    let deadline = Instant::now() + WAIT;
    while sums.end_snapshot() != BTreeMap::from([(TASK, 700)]) {
        assert!(Instant::now() < deadline, "end sums {:?}", sums.end_snapshot());
        s.tm.take_restored(&s.consumer).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    s.tm.set_standbys(&BTreeSet::new()).unwrap();
    assert!(s.tm.standby_ids().is_empty());
    assert_eq!(gauge.get(), 0);
    assert_eq!(s.check_store(), Some(699), "the removed standby's checkpoint");
    assert_eq!(sums.snapshot(), BTreeMap::from([(TASK, 699)]), "the state held");
    assert!(
        sums.end_snapshot().is_empty(),
        "a standby no longer followed has no end"
    );

    s.write(200);
    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    // The counter series was removed with the first standby: this one counts from 0.
    s.wait_applied(200);
    s.tm.close(&s.consumer, true).unwrap();
    assert_eq!(s.check_store(), Some(899));
}

/// Exactly-once: the standby applies only committed changelog records (an aborted
/// transaction's never reach the store), its checkpoint covers the transaction markers, and
/// a promotion restores only what follows it.
#[test]
fn an_exactly_once_standby_applies_only_committed_records() {
    let Some(mut s) = Setup::new("standby exactly-once", true) else {
        return;
    };
    s.write_transaction(300, true);
    s.write_transaction(200, false);
    s.write_transaction(300, true);
    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    s.wait_applied(600);
    s.tm.set_standbys(&BTreeSet::new()).unwrap();
    // Offsets 0..=299 and the commit marker at 300; the aborted 301..=500 and the abort
    // marker at 501; 502..=801 and the commit marker at 802.
    assert_eq!(s.check_store(), Some(802));

    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    s.write_transaction(100, true);
    s.write_transaction(50, false);
    s.wait_applied(100);
    s.write_transaction(100, true);
    let (applied, restored) = s.promote();
    println!("the standby applied {applied} records, the promotion restored {restored}");
    assert!(restored <= 100, "restoration applied {restored} records");
    assert_eq!(applied + restored, 200, "every committed record applied once");
    s.tm.close(&s.consumer, true).unwrap();
    // 803..=902 and 903, the aborted 904..=953 and 954, then 955..=1054 and 1055.
    assert_eq!(s.check_store(), Some(1_055));
}

/// A task assigned as active while also wanted as standby gets no standby; the active task
/// restores from the checkpoint a removed standby left on disk, not from the start.
#[test]
fn an_assigned_task_restores_from_a_removed_standbys_checkpoint() {
    let Some(mut s) = Setup::new("standby early promotion", false) else {
        return;
    };
    s.write(800);
    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    s.wait_applied(800);
    s.tm.set_standbys(&BTreeSet::new()).unwrap();
    assert_eq!(s.check_store(), Some(799));

    s.write(400);
    s.tm.set_pending(&s.assignment());
    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    assert!(
        s.tm.standby_ids().is_empty(),
        "no standby for a task being assigned"
    );
    let standby = s.standby_counter();
    let (applied, restored) = s.finish_promotion(&standby);
    assert_eq!(
        (applied, restored),
        (0, 400),
        "only what follows the checkpoint is restored"
    );
    s.tm.close(&s.consumer, true).unwrap();
    assert_eq!(s.check_store(), Some(1_199));
}

/// Records deleted from the changelog before the standby saw them: the standby is found
/// corrupt, wiped and started over from the log start; it then holds exactly what the
/// changelog holds.
#[test]
fn a_standby_behind_the_log_start_is_wiped_and_starts_over() {
    let Some(mut s) = Setup::new("standby gap", false) else {
        return;
    };
    s.write(500);
    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    s.wait_applied(500);
    s.tm.set_standbys(&BTreeSet::new()).unwrap();
    assert_eq!(s.check_store(), Some(499));

    s.write(500);
    kafka::delete_records(&s.bootstrap, &s.changelog, 0, 800).unwrap();
    let corrupted = s
        .factory
        .metrics
        .families()
        .thread_tasks_corrupted
        .with_label_values(&[&s.app_id, THREAD]);
    assert_eq!(corrupted.get(), 0);
    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    // Offsets 800..=999 are all the changelog holds now.
    s.wait_applied(200);
    assert_eq!(corrupted.get(), 1, "the gap counts as a corrupted task");
    assert_eq!(s.tm.standby_ids(), BTreeSet::from([TASK]));
    s.tm.set_standbys(&BTreeSet::new()).unwrap();
    s.model = BTreeMap::new();
    let kept: Vec<ProduceRecord> = s.log[800..].to_vec();
    s.add_to_model(&kept);
    assert_eq!(s.check_store(), Some(999));
}

/// A standby whose state directory is held elsewhere (another thread's task) waits, and
/// starts once the directory is free, as the thread's loop retries it.
#[test]
fn a_standby_waits_for_its_state_directory() {
    let Some(mut s) = Setup::new("standby waiting", false) else {
        return;
    };
    s.write(300);
    let mut elsewhere = s.open_stores();
    s.tm.set_standbys(&BTreeSet::from([TASK])).unwrap();
    assert_eq!(
        s.tm.standby_ids(),
        BTreeSet::from([TASK]),
        "a waiting standby is a standby"
    );
    assert!(s.tm.has_pending(), "the loop retries it");
    assert_eq!(s.standby_records(), 0);
    for store in &mut elsewhere {
        store.store.close().unwrap();
    }
    drop(elsewhere);
    s.tm.create_pending(&s.consumer).unwrap();
    assert!(!s.tm.has_pending());
    s.wait_applied(300);
    s.tm.close(&s.consumer, true).unwrap();
    assert_eq!(s.check_store(), Some(299));
}
