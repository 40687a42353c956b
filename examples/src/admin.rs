//! Topic and group administration for the example programs, with rdkafka's admin API:
//! create a program's topics, and delete what one run of a demo created.
//!
//! Every call is bounded in time ([`ADMIN_TIMEOUT`]).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaResult;
use rdkafka::types::RDKafkaErrorCode;

use crate::ExampleError;

/// The bound of each admin request (and of waiting for a created topic's leaders).
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A name for one run of a program: `<prefix>-<unix millis>-<pid>`, different for every
/// run on a machine. The demos prefix their topics, application ids and groups with it, so
/// runs sharing a broker never read each other's records.
pub fn run_id(prefix: &str) -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{prefix}-{millis}-{}", std::process::id())
}

fn admin(bootstrap: &str) -> Result<AdminClient<DefaultClientContext>, ExampleError> {
    Ok(ClientConfig::new().set("bootstrap.servers", bootstrap).create()?)
}

fn options() -> AdminOptions {
    AdminOptions::new()
        .request_timeout(Some(ADMIN_TIMEOUT))
        .operation_timeout(Some(ADMIN_TIMEOUT))
}

/// Creates `topics` with `partitions` partitions (broker-default replication) where they do
/// not exist yet, then waits until each has a leader for every partition. An existing topic
/// is left as it is, whatever its partition count.
///
/// Topics the metadata already lists are not asked for again: a restarted program then
/// needs no admin request, which a paused broker (the one the cluster named to take them)
/// could hold up. A request that times out is made again until [`ADMIN_TIMEOUT`] has
/// passed: by then the cluster names another broker.
pub fn create_topics(bootstrap: &str, topics: &[String], partitions: i32) -> Result<(), ExampleError> {
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let listed: Vec<String> = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .map(|m| m.topics().iter().map(|t| t.name().to_owned()).collect())
        .unwrap_or_default();
    let missing: Vec<&String> = topics.iter().filter(|t| !listed.contains(t)).collect();
    if !missing.is_empty() {
        let admin = admin(bootstrap)?;
        let new: Vec<NewTopic<'_>> = missing
            .iter()
            .map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(-1)))
            .collect();
        let deadline = Instant::now() + ADMIN_TIMEOUT;
        let attempt = Duration::from_secs(10);
        let options = AdminOptions::new()
            .request_timeout(Some(attempt))
            .operation_timeout(Some(attempt));
        let results = loop {
            match block_on_timeout(
                admin.create_topics(new.iter(), &options),
                attempt + Duration::from_secs(1),
            ) {
                Some(Ok(results)) => break results,
                Some(Err(e)) if Instant::now() >= deadline => return Err(e.into()),
                None if Instant::now() >= deadline => {
                    return Err(ExampleError::Other(format!(
                        "creating topics {missing:?} on {bootstrap}: timed out"
                    )));
                }
                // Timed out (a broker that does not answer), or failed as a whole: again.
                Some(Err(_)) | None => {}
            }
        };
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => {
                    return Err(ExampleError::Other(format!("creating topic {topic}: {code}")));
                }
            }
        }
    }
    for t in topics {
        wait_for_leaders(&consumer, t, ADMIN_TIMEOUT)?;
    }
    Ok(())
}

/// Waits until the broker's metadata lists `topic` with a leader for every partition.
fn wait_for_leaders(consumer: &BaseConsumer, topic: &str, timeout: Duration) -> Result<(), ExampleError> {
    let deadline = Instant::now() + timeout;
    loop {
        let request = deadline
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_millis(100), Duration::from_secs(5));
        let last = match consumer.fetch_metadata(Some(topic), request) {
            Ok(metadata) => match metadata.topics().iter().find(|m| m.name() == topic) {
                Some(m) if m.error().is_some() => {
                    format!("topic error {:?}", m.error().map(RDKafkaErrorCode::from))
                }
                Some(m) if !m.partitions().is_empty() && m.partitions().iter().all(|p| p.leader() >= 0) => {
                    return Ok(());
                }
                Some(m) => format!("{} partitions, not all with a leader", m.partitions().len()),
                None => "not in the metadata".to_owned(),
            },
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(ExampleError::Other(format!(
                "topic {topic}: no leader for every partition after {timeout:?} (last: {last})"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Wakes the thread blocked in [`block_on_timeout`].
struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` (an rdkafka admin future, completed by librdkafka's threads) on the
/// calling thread until it completes or `timeout` passes (`None`). It blocks only the
/// calling thread, so it works inside or outside a tokio runtime alike.
fn block_on_timeout<F: Future>(future: F, timeout: Duration) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let deadline = Instant::now() + timeout;
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return Some(output);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout(deadline - now);
    }
}

/// The names of the topics whose name starts with `prefix`, sorted.
pub fn topics_with_prefix(bootstrap: &str, prefix: &str) -> Result<Vec<String>, ExampleError> {
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let metadata = consumer.fetch_metadata(None, ADMIN_TIMEOUT)?;
    let mut names: Vec<String> = metadata
        .topics()
        .iter()
        .map(|t| t.name().to_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    Ok(names)
}

/// The consumer groups whose name starts with `prefix`, sorted.
pub fn groups_with_prefix(bootstrap: &str, prefix: &str) -> Result<Vec<String>, ExampleError> {
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let list = consumer.fetch_group_list(None, ADMIN_TIMEOUT)?;
    let mut names: Vec<String> = list
        .groups()
        .iter()
        .map(|g| g.name().to_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    Ok(names)
}

/// Deletes `topics`; one that does not exist (any more) counts as deleted.
pub fn delete_topics(bootstrap: &str, topics: &[String]) -> Result<(), ExampleError> {
    if topics.is_empty() {
        return Ok(());
    }
    let admin = admin(bootstrap)?;
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let results = block_on_timeout(admin.delete_topics(&names, &options()), ADMIN_TIMEOUT);
    check_deleted(
        "topic",
        topics,
        results,
        RDKafkaErrorCode::UnknownTopicOrPartition,
    )
}

/// Deletes the consumer groups `groups` (they must have no members left); one that does not
/// exist counts as deleted.
pub fn delete_groups(bootstrap: &str, groups: &[String]) -> Result<(), ExampleError> {
    if groups.is_empty() {
        return Ok(());
    }
    let admin = admin(bootstrap)?;
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let results = block_on_timeout(admin.delete_groups(&names, &options()), ADMIN_TIMEOUT);
    check_deleted("group", groups, results, RDKafkaErrorCode::GroupIdNotFound)
}

/// The answer for one topic or group of an admin delete call.
type DeleteResult = Result<String, (String, RDKafkaErrorCode)>;

/// The outcome of deleting the `what`s (topics or groups) `names`: `results` is the admin
/// call's answer (`None`: it timed out); a name answered with `absent` counts as deleted.
fn check_deleted(
    what: &str,
    names: &[String],
    results: Option<KafkaResult<Vec<DeleteResult>>>,
    absent: RDKafkaErrorCode,
) -> Result<(), ExampleError> {
    let results =
        results.ok_or_else(|| ExampleError::Other(format!("deleting {what}s {names:?}: timed out")))??;
    for result in results {
        match result {
            Ok(_) => {}
            Err((_, code)) if code == absent => {}
            Err((name, code)) => {
                return Err(ExampleError::Other(format!("deleting {what} {name}: {code}")));
            }
        }
    }
    Ok(())
}

/// Deletes every topic and consumer group named `<run>-*` (a demo run's own topics, its
/// applications' changelogs and repartition topics, and their groups); says what it did in
/// one line, which a demo prints.
pub fn delete_run(bootstrap: &str, run: &str) -> String {
    let prefix = format!("{run}-");
    let deleted = (|| -> Result<(usize, usize), ExampleError> {
        let topics = topics_with_prefix(bootstrap, &prefix)?;
        let groups = groups_with_prefix(bootstrap, &prefix)?;
        delete_groups(bootstrap, &groups)?;
        delete_topics(bootstrap, &topics)?;
        Ok((topics.len(), groups.len()))
    })();
    match deleted {
        Ok((t, g)) => format!("deleted this run's {t} topics and {g} consumer groups ({prefix}*)"),
        Err(e) => format!("could not delete this run's topics ({prefix}*): {e}"),
    }
}

/// A consumer of every partition (`0..partitions`) of `topics` from the beginning, in
/// group `group` without committing: how the binaries read their outputs back.
pub fn output_reader(
    bootstrap: &str,
    group: &str,
    topics: &[&str],
    partitions: i32,
) -> Result<BaseConsumer, ExampleError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()?;
    let mut assignment = rdkafka::TopicPartitionList::new();
    for topic in topics {
        for p in 0..partitions {
            assignment.add_partition_offset(topic, p, rdkafka::Offset::Beginning)?;
        }
    }
    consumer.assign(&assignment)?;
    Ok(consumer)
}

/// Reads `consumer` into `state` with `take` until `done(state)` holds, checked every 500 ms;
/// fails with `stalled(state)` once no record has come for `stall_timeout`: how the runs read
/// their outputs until each holds exactly the expected result.
pub(crate) fn read_until<S>(
    consumer: &BaseConsumer,
    stall_timeout: Duration,
    state: &mut S,
    mut take: impl FnMut(&mut S, &rdkafka::message::BorrowedMessage<'_>) -> Result<(), ExampleError>,
    done: impl Fn(&S) -> bool,
    stalled: impl Fn(&S) -> ExampleError,
) -> Result<(), ExampleError> {
    let mut last_record = Instant::now();
    let mut last_check = Instant::now();
    loop {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                last_record = Instant::now();
                take(state, &m)?;
            }
            Some(Err(e)) => return Err(ExampleError::Kafka(e)),
            None => {}
        }
        if last_check.elapsed() >= Duration::from_millis(500) {
            last_check = Instant::now();
            if done(state) {
                return Ok(());
            }
            if last_record.elapsed() >= stall_timeout {
                return Err(stalled(state));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_valid_topic_prefixes() {
        let a = run_id("demo");
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(parts.len(), 3, "{a}");
        assert_eq!(parts[0], "demo");
        assert!(parts[1].parse::<u128>().unwrap() > 1_600_000_000_000, "{a}");
        assert_eq!(parts[2], std::process::id().to_string());
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }
}
