//! The web-hook store served over HTTP from any instance (`webhooks::query`), against the
//! real broker (skipped without one, see `streams_test_utils::kafka::require_kafka`).
//!
//! Two instances of the join (one application id, separate state directories, each with
//! its own query server announced as `application.server`) over 6 partitions hold the
//! hooks of 200 users (1 to 5 each, some deleted, some replaced, some deleted and
//! registered again) and of one user with 250 hooks. Once both run, their metadata agree
//! on who hosts every partition and the application has committed every hook record, both
//! instances are asked for every user: each answer is exactly that user's hooks, served
//! by the instance that hosts the user (forwarded when that is the other one). The big
//! user is paged through `limit=100` and `next` from both instances. Then bad input gets
//! 400, an unknown path 404, and a forwarded request to an instance that does not host
//! the user 503 with `Retry-After: 1` (never forwarded again).
//!
//! Fresh topics and application id; every wait is bounded, and a 503 is retried until a
//! deadline.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use streams_core::{KafkaStreams, State, StreamsConfig};
use streams_examples::webhooks::query::{FORWARDED, HooksPage, QueryListener, QueryServer, SERVED_BY};
use streams_examples::webhooks::{
    WebHook, WebHookProducer, WebHookTopics, hook_key, topology, user_partition,
};
use streams_test_utils::{kafka, queries};

const PARTITIONS: i32 = 6;
const USERS: u64 = 200;
/// The user with many hooks, paged through.
const BIG_USER: u64 = 1_000;
/// Its hooks before deletions (10 are deleted: 250 remain).
const BIG_USER_HOOKS: u64 = 260;
const WAIT: Duration = Duration::from_secs(60);

/// One instance of the join with its query server, which has the join's `Queries`. The
/// join stays on the test's thread (it is neither `Send` nor `Sync`): the churn's client
/// thread is given the servers only.
struct Instance {
    app: KafkaStreams,
    server: QueryServer,
    _state: tempfile::TempDir,
}

impl Instance {
    fn start(bootstrap: &str, application_id: &str, topics: &WebHookTopics) -> Self {
        let listener = QueryListener::bind("127.0.0.1:0").unwrap();
        let state = tempfile::tempdir().unwrap();
        let properties: Vec<(String, String)> = [
            ("application.id", application_id),
            ("bootstrap.servers", bootstrap),
            ("state.dir", &state.path().display().to_string()),
            ("application.server", listener.endpoint()),
            ("commit.interval.ms", "200"),
            ("consumer.session.timeout.ms", "6000"),
            ("consumer.heartbeat.interval.ms", "500"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let mut app = KafkaStreams::new(
            topology(topics).unwrap(),
            StreamsConfig::from_properties(properties).unwrap(),
        )
        .unwrap();
        let server = listener.serve(app.queries()).unwrap();
        app.start().unwrap();
        Self {
            app,
            server,
            _state: state,
        }
    }

    fn endpoint(&self) -> &str {
        self.server.endpoint()
    }

    fn state(&self) -> State {
        self.app.state()
    }

    /// This instance's view: endpoint -> the partitions it hosts.
    fn view(&self) -> BTreeMap<String, BTreeSet<i32>> {
        queries::view(&self.app)
    }

    /// Stops the query server, then closes the join (and then removes its state).
    fn close(self) {
        let Self {
            mut app,
            server,
            _state: state,
        } = self;
        drop(server);
        assert!(app.close(Duration::from_secs(30)), "closed in time");
        drop(app);
        drop(state);
    }
}

/// The hooks the test registers, deletes and replaces, and what the store must hold
/// after: per user, the hooks in key order.
struct Hooks {
    upserts: Vec<WebHook>,
    /// (user, hook), in the order sent: each after the upserts it follows.
    steps: Vec<Step>,
    expected: BTreeMap<u64, Vec<WebHook>>,
}

enum Step {
    Upsert(WebHook),
    Delete(u64, u64),
}

fn hook(user_id: u64, n: u64, version: &str) -> WebHook {
    WebHook {
        webhook_id: user_id * 1_000 + n,
        user_id,
        event_id: 100 + n % 3,
        url: format!("http://example.invalid/{user_id}/{n}{version}"),
    }
}

/// Users 1..=200 with 1 to 5 hooks; every 4th user loses hook 1 (so users with one hook
/// have none left), every 5th replaces its last hook, every 7th deletes hook 2 and
/// registers it again; [`BIG_USER`] has 260 hooks of which every 26th is deleted.
fn hooks() -> Hooks {
    let mut steps = Vec::new();
    for user in 1..=USERS {
        let count = (user * 7 + 3) % 5 + 1;
        for n in 1..=count {
            steps.push(Step::Upsert(hook(user, n, "")));
        }
        if user % 4 == 0 {
            steps.push(Step::Delete(user, hook(user, 1, "").webhook_id));
        }
        if user % 5 == 0 {
            steps.push(Step::Upsert(hook(user, count, "-v2")));
        }
        if user % 7 == 0 && count >= 2 {
            steps.push(Step::Delete(user, hook(user, 2, "").webhook_id));
            steps.push(Step::Upsert(hook(user, 2, "-again")));
        }
    }
    for n in 1..=BIG_USER_HOOKS {
        steps.push(Step::Upsert(hook(BIG_USER, n, "")));
    }
    for n in (26..=BIG_USER_HOOKS).step_by(26) {
        steps.push(Step::Delete(BIG_USER, hook(BIG_USER, n, "").webhook_id));
    }
    // What the store holds: the last step of each key.
    let mut store: BTreeMap<String, Option<WebHook>> = BTreeMap::new();
    for s in &steps {
        match s {
            Step::Upsert(h) => store.insert(hook_key(h.user_id, h.webhook_id), Some(h.clone())),
            Step::Delete(user, id) => store.insert(hook_key(*user, *id), None),
        };
    }
    let mut expected: BTreeMap<u64, Vec<WebHook>> = (1..=USERS).map(|u| (u, Vec::new())).collect();
    // Key order: the store's order, which a page follows.
    for h in store.into_values().flatten() {
        expected.entry(h.user_id).or_default().push(h);
    }
    let upserts = steps
        .iter()
        .filter_map(|s| match s {
            Step::Upsert(h) => Some(h.clone()),
            Step::Delete(..) => None,
        })
        .collect();
    Hooks {
        upserts,
        steps,
        expected,
    }
}

/// An HTTP answer: status, the headers the test looks at, body.
#[derive(Debug)]
struct Answer {
    status: u16,
    served_by: Option<String>,
    retry_after: Option<String>,
    body: String,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

fn get(agent: &ureq::Agent, url: &str, forwarded: bool) -> Answer {
    let mut request = agent.get(url);
    if forwarded {
        request = request.header(FORWARDED, "the-test");
    }
    let mut r = request.call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let header = |name: &str| r.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
    let (served_by, retry_after) = (header(SERVED_BY), header("retry-after"));
    Answer {
        status: r.status().as_u16(),
        served_by,
        retry_after,
        body: r.body_mut().read_to_string().unwrap(),
    }
}

/// GETs `url` until it is not a 503 (each 503 must say `Retry-After: 1`), or panics at
/// `deadline`; the answer and how many 503s came first.
fn get_retrying(agent: &ureq::Agent, url: &str, deadline: Instant) -> (Answer, u32) {
    let mut unavailable = 0;
    loop {
        let a = get(agent, url, false);
        if a.status != 503 {
            return (a, unavailable);
        }
        assert_eq!(a.retry_after.as_deref(), Some("1"), "{url}: {a:?}");
        assert!(Instant::now() < deadline, "{url} still unavailable: {a:?}");
        unavailable += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until both instances run and agree that each hosts some of the partitions,
/// disjoint and covering all of them; the agreed view.
fn converged(instances: &[&Instance], deadline: Instant) -> BTreeMap<String, BTreeSet<i32>> {
    let expected: BTreeSet<&str> = instances.iter().map(|i| i.endpoint()).collect();
    loop {
        let states: Vec<State> = instances.iter().map(|i| i.state()).collect();
        let views: Vec<_> = instances.iter().map(|i| i.view()).collect();
        let good = queries::views_agree(&views, &expected, PARTITIONS as usize)
            && states.iter().all(|s| *s == State::Running);
        if good {
            return views.into_iter().next().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "no agreement: states {states:?}, views {views:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the application committed, on every partition of `topic`, the offset after
/// the last record sent there (`sent[p]` records: the topic is fresh and the producer is
/// not transactional).
fn wait_committed(bootstrap: &str, group: &str, topic: &str, sent: &BTreeMap<i32, i64>, deadline: Instant) {
    loop {
        let committed = kafka::committed_offsets(bootstrap, group, topic, WAIT).unwrap();
        let done = committed
            .iter()
            .all(|(p, o)| o.unwrap_or(0) >= sent.get(p).copied().unwrap_or(0));
        if done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "committed {committed:?}, sent {sent:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn every_instance_answers_for_every_user_over_http() {
    let Some(bootstrap) = kafka::require_kafka("every_instance_answers_for_every_user_over_http") else {
        return;
    };
    let started = Instant::now();
    let topics = WebHookTopics::with_suffix(&format!("-{}", kafka::unique_name("iq")));
    for t in [&topics.web_hooks, &topics.event_logs, &topics.requests] {
        kafka::create_topic(&bootstrap, t, PARTITIONS, &[]).unwrap();
    }
    let application_id = kafka::unique_name("webhook-queries");
    let a = Instance::start(&bootstrap, &application_id, &topics);
    let b = Instance::start(&bootstrap, &application_id, &topics);
    let deadline = Instant::now() + WAIT;
    let view = converged(&[&a, &b], deadline);
    let joined = started.elapsed();

    let hooks = hooks();
    let producer = WebHookProducer::new(&bootstrap, topics.clone()).unwrap();
    let mut sent: BTreeMap<i32, i64> = BTreeMap::new();
    for step in &hooks.steps {
        let user = match step {
            Step::Upsert(h) => {
                producer.upsert(h).unwrap();
                h.user_id
            }
            Step::Delete(user, id) => {
                producer.delete(*user, *id).unwrap();
                *user
            }
        };
        *sent.entry(user_partition(user, PARTITIONS)).or_default() += 1;
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    wait_committed(&bootstrap, &application_id, &topics.web_hooks, &sent, deadline);
    let loaded = started.elapsed();
    assert_eq!(hooks.expected[&BIG_USER].len(), 250);
    assert!(
        hooks.expected.values().any(Vec::is_empty),
        "some users have no hooks left"
    );
    assert!(hooks.upserts.len() > 800, "{}", hooks.upserts.len());

    // Who hosts each partition, as both instances agreed.
    let owner: BTreeMap<i32, &str> = view
        .iter()
        .flat_map(|(endpoint, partitions)| partitions.iter().map(move |p| (*p, endpoint.as_str())))
        .collect();
    let agent = agent();
    let deadline = Instant::now() + WAIT;
    let mut retried = 0;
    for asked in [&a, &b] {
        let (mut local, mut forwarded) = (0, 0);
        for user in 1..=USERS {
            let url = asked.server.url(&format!("/users/{user}/hooks"));
            let (answer, unavailable) = get_retrying(&agent, &url, deadline);
            retried += unavailable;
            assert_eq!(answer.status, 200, "{url}: {answer:?}");
            let page: HooksPage = serde_json::from_str(&answer.body).unwrap();
            assert_eq!(
                page,
                HooksPage {
                    user_id: user,
                    hooks: hooks.expected[&user].clone(),
                    next: None,
                },
                "{url}"
            );
            let host = owner[&user_partition(user, PARTITIONS)];
            assert_eq!(answer.served_by.as_deref(), Some(host), "{url}");
            if host == asked.endpoint() {
                local += 1;
            } else {
                forwarded += 1;
            }
        }
        println!(
            "{}: {local} users answered here, {forwarded} forwarded",
            asked.endpoint()
        );
        assert!(local > 0 && forwarded > 0, "{local} local, {forwarded} forwarded");
    }
    let queried = started.elapsed();

    // The big user, page by page from both instances: the concatenation is exact.
    for (i, asked) in [&a, &b].into_iter().enumerate() {
        let mut all: Vec<WebHook> = Vec::new();
        let mut sizes = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut path = format!("/users/{BIG_USER}/hooks?limit=100");
            if let Some(key) = &after {
                // The second instance sends the key percent-encoded, as a client may.
                let key = if i == 1 {
                    key.replace(':', "%3A")
                } else {
                    key.clone()
                };
                path.push_str(&format!("&after={key}"));
            }
            let (answer, unavailable) = get_retrying(&agent, &asked.server.url(&path), deadline);
            retried += unavailable;
            assert_eq!(answer.status, 200, "{path}: {answer:?}");
            let page: HooksPage = serde_json::from_str(&answer.body).unwrap();
            sizes.push(page.hooks.len());
            if let (Some(last), Some(next)) = (page.hooks.last(), &page.next) {
                assert_eq!(*next, hook_key(BIG_USER, last.webhook_id), "next is the last key");
            }
            all.extend(page.hooks);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
            assert!(sizes.len() < 10, "{sizes:?}");
        }
        assert_eq!(sizes, [100, 100, 50], "from {}", asked.endpoint());
        assert_eq!(all, hooks.expected[&BIG_USER], "from {}", asked.endpoint());
    }

    // A page that ends exactly at the user's last hook still names it as `next` (the
    // range may hold more); the page after it is empty and ends the paging.
    let (five, expected) = hooks.expected.iter().find(|(_, h)| h.len() == 5).unwrap();
    let url = a.server.url(&format!("/users/{five}/hooks?limit=5"));
    let (answer, _) = get_retrying(&agent, &url, deadline);
    let page: HooksPage = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(page.hooks, *expected, "{url}");
    let next = page.next.expect("next after a full page");
    let url = b.server.url(&format!("/users/{five}/hooks?limit=5&after={next}"));
    let (answer, _) = get_retrying(&agent, &url, deadline);
    let page: HooksPage = serde_json::from_str(&answer.body).unwrap();
    assert_eq!((page.hooks.len(), page.next), (0, None), "{url}");

    // Bad input, unknown paths.
    for asked in [&a, &b] {
        for (path, status) in [
            ("/users/abc/hooks", 400),
            ("/users/-3/hooks", 400),
            ("/users/3/hooks?limit=0", 400),
            ("/users/3/hooks?limit=1001", 400),
            ("/users/3/hooks?after=00000000000000000004:1", 400),
            ("/users/3", 404),
            ("/hooks", 404),
        ] {
            let answer = get(&agent, &asked.server.url(path), false);
            assert_eq!(answer.status, status, "{path}: {answer:?}");
        }
    }
    // A forwarded request is answered by the owner, and refused (never forwarded again)
    // by the other instance.
    let user_of = |host: &str| {
        (1..=USERS)
            .find(|u| owner[&user_partition(*u, PARTITIONS)] == host)
            .unwrap()
    };
    for (asked, other) in [(&a, &b), (&b, &a)] {
        let theirs = user_of(other.endpoint());
        let refused = get(&agent, &asked.server.url(&format!("/users/{theirs}/hooks")), true);
        assert_eq!(refused.status, 503, "{refused:?}");
        assert_eq!(refused.retry_after.as_deref(), Some("1"));
        assert!(
            refused.body.starts_with("not available here now, retry"),
            "{refused:?}"
        );
        let ours = user_of(asked.endpoint());
        let answered = get(&agent, &asked.server.url(&format!("/users/{ours}/hooks")), true);
        assert_eq!(answered.status, 200, "{answered:?}");
    }

    let checked = started.elapsed();

    // Churn: a third instance joins, then leaves, while a client keeps asking the first two
    // for every user. Each answer is exact or a 503, never partial or wrong.
    let stop = AtomicBool::new(false);
    let servers = [&a.server, &b.server];
    let (churn, during) = std::thread::scope(|scope| {
        let client = scope.spawn(|| {
            let mut exact = 0u32;
            let mut unavailable: BTreeMap<String, u32> = BTreeMap::new();
            let agent = self::agent();
            'outer: loop {
                for user in 1..=USERS {
                    for asked in servers {
                        if stop.load(Ordering::Acquire) {
                            break 'outer;
                        }
                        let url = asked.url(&format!("/users/{user}/hooks"));
                        let answer = get(&agent, &url, false);
                        match answer.status {
                            200 => {
                                let page: HooksPage = serde_json::from_str(&answer.body).unwrap();
                                assert_eq!(
                                    page.hooks, hooks.expected[&user],
                                    "{url} during churn: {answer:?}"
                                );
                                assert_eq!(page.next, None);
                                exact += 1;
                            }
                            503 => *unavailable.entry(answer.body.trim().to_owned()).or_default() += 1,
                            _ => panic!("{url} during churn: {answer:?}"),
                        }
                    }
                }
            }
            (exact, unavailable)
        });
        let c = Instance::start(&bootstrap, &application_id, &topics);
        let three = converged(&[&a, &b, &c], Instant::now() + WAIT);
        println!("with a third instance: {three:?}");
        // Every user from the newcomer too.
        let deadline = Instant::now() + WAIT;
        for user in 1..=USERS {
            let url = c.server.url(&format!("/users/{user}/hooks"));
            let (answer, _) = get_retrying(&agent, &url, deadline);
            assert_eq!(answer.status, 200, "{url}: {answer:?}");
            let page: HooksPage = serde_json::from_str(&answer.body).unwrap();
            assert_eq!(page.hooks, hooks.expected[&user], "{url}");
        }
        c.close();
        let two = converged(&[&a, &b], Instant::now() + WAIT);
        println!("after it left: {two:?}");
        stop.store(true, Ordering::Release);
        (client.join().unwrap(), started.elapsed())
    });
    println!(
        "during the churn: {} exact answers; 503s: {:#?}",
        churn.0, churn.1
    );
    assert!(churn.0 > 0, "some answers during the churn");

    println!(
        "joined in {joined:.1?}, hooks committed at {loaded:.1?}, {} users asked of both at {queried:.1?} \
         ({retried} answers of 503 retried), paging and input checked at {checked:.1?}, churn done at \
         {during:.1?}",
        USERS,
    );
    for i in [a, b] {
        i.close();
    }
    println!("closed at {:.1?}", started.elapsed());
}
