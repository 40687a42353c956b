//! The faults of the scenarios, and injecting them: the cluster's verbs in order, the
//! instances watched throughout, and after each fault the time until the group commits
//! again. With `CLUSTER_KILL_INSTANCE=1` every fault also kills an instance (SIGKILL) while
//! it is on, the next one each time (A, B, C, A, ...), and starts it again.

use std::time::{Duration, Instant};

use crate::common::cluster::{Cluster, env_flag, env_number};
use crate::common::instance::{Instance, Run, sleep_alive};
use crate::recovery::{Recovery, recovery};

/// How long into a pause instance A is killed, and how long after that it starts again.
pub(crate) const CRASH_AFTER: Duration = Duration::from_secs(5);
/// Between a broker's return and the next fault, at least.
const BETWEEN_FAULTS: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy)]
pub(crate) enum Faults {
    /// This many rounds of: `bounce` the leader of an input partition (0, 1, ...).
    Bounces(usize),
    /// `pause` the leader of input partition 0 this long, then `resume` it.
    Pause(Duration),
    /// This many rounds of: `bounce` the active KRaft controller.
    ControllerBounces(usize),
    /// `pause` every node this long (the whole cluster unreachable), then `resume` them.
    PauseAll(Duration),
    /// `kill` every node (SIGKILL), wait this long, then start them all again (`ensure`).
    KillAll(Duration),
    /// `pause` the node of the application's group coordinator this long, then `resume` it.
    PauseGroupCoordinator(Duration),
    /// `pause` the leader of input partition 0 this long; during it kill instance A
    /// (SIGKILL) and start it again.
    PauseAndKillInstance(Duration),
    /// Instances A and B alone until every input partition is committed; then C starts and
    /// `CLUSTER_REBALANCE_PAUSE_AFTER_MS` (1,500 by default) later, while tasks move to it,
    /// the group coordinator's node is paused this long.
    PauseCoordinatorMidRebalance(Duration),
    /// `restart` (a clean stop and start) each node in turn.
    RollingRestart,
    /// The instances know the cluster through one node only, the group coordinator's:
    /// `pause` it and wait, while it is paused, until the group commits again on every
    /// input partition; then `resume` it.
    PauseOnlyBootstrap,
}

impl Faults {
    /// `CLUSTER_FAULT_ROUNDS` bounces (2 by default).
    pub(crate) fn bounces() -> Self {
        Self::Bounces(env_number("CLUSTER_FAULT_ROUNDS", 2) as usize)
    }

    /// A pause of `CLUSTER_PAUSE_S` seconds (30 by default).
    pub(crate) fn pause() -> Self {
        Self::Pause(pause_s())
    }

    /// `CLUSTER_FAULT_ROUNDS` controller bounces (2 by default).
    pub(crate) fn controller_bounces() -> Self {
        Self::ControllerBounces(env_number("CLUSTER_FAULT_ROUNDS", 2) as usize)
    }

    /// Every node paused for `CLUSTER_ALL_DOWN_S` seconds (60 by default).
    pub(crate) fn pause_all() -> Self {
        Self::PauseAll(all_down_s())
    }

    /// Every node killed, and down for `CLUSTER_ALL_DOWN_S` seconds (60 by default).
    pub(crate) fn kill_all() -> Self {
        Self::KillAll(all_down_s())
    }

    /// The group coordinator's node paused for `CLUSTER_PAUSE_S` seconds (30 by default).
    pub(crate) fn pause_group_coordinator() -> Self {
        Self::PauseGroupCoordinator(pause_s())
    }

    /// A pause of `CLUSTER_PAUSE_S` seconds (30 by default, at least 15) with an instance
    /// killed during it.
    pub(crate) fn pause_and_kill_instance() -> Self {
        Self::PauseAndKillInstance(pause_s().max(CRASH_AFTER * 3))
    }

    /// The group coordinator paused `CLUSTER_PAUSE_S` seconds (30 by default) while tasks
    /// move to a joining instance.
    pub(crate) fn pause_coordinator_mid_rebalance() -> Self {
        Self::PauseCoordinatorMidRebalance(pause_s())
    }
}

fn pause_s() -> Duration {
    Duration::from_secs(env_number("CLUSTER_PAUSE_S", 30))
}

fn all_down_s() -> Duration {
    Duration::from_secs(env_number("CLUSTER_ALL_DOWN_S", 60))
}

/// Whether `CLUSTER_KILL_INSTANCE` asks for an instance killed during every fault.
pub(crate) fn kill_instances() -> bool {
    env_flag("CLUSTER_KILL_INSTANCE")
}

/// One scenario's faults under way: what they act on, and what they measured.
pub(crate) struct Injection<'a> {
    pub(crate) test: &'static str,
    pub(crate) started: Instant,
    pub(crate) cluster: &'a Cluster,
    pub(crate) run: &'a Run,
    pub(crate) instances: &'a mut [Instance],
    /// The node the instances know the cluster by, for `PauseOnlyBootstrap`.
    pub(crate) only_bootstrap: Option<u32>,
    /// Kill an instance during every fault (`CLUSTER_KILL_INSTANCE`); off by default.
    pub(crate) kill_instances: bool,
    /// The instance killed next.
    next_victim: usize,
    /// How long the group took to commit again after each fault.
    pub(crate) recoveries: Vec<Recovery>,
}

impl<'a> Injection<'a> {
    pub(crate) fn new(
        test: &'static str,
        started: Instant,
        cluster: &'a Cluster,
        run: &'a Run,
        instances: &'a mut [Instance],
    ) -> Self {
        Self {
            test,
            started,
            cluster,
            run,
            instances,
            only_bootstrap: None,
            kill_instances: false,
            next_victim: 0,
            recoveries: Vec::new(),
        }
    }

    fn say(&self, what: &str) {
        eprintln!(
            "{}: {:5.1} s: {what}",
            self.test,
            self.started.elapsed().as_secs_f64()
        );
    }

    fn sleep(&mut self, how_long: Duration) {
        sleep_alive(how_long, self.instances);
    }

    /// With `CLUSTER_KILL_INSTANCE`: [`kill_next`](Self::kill_next).
    fn kill_one(&mut self) -> Option<usize> {
        self.kill_instances.then(|| self.kill_next())
    }

    /// Kills the next instance (SIGKILL), A, B, C in turn; its index.
    fn kill_next(&mut self) -> usize {
        let victim = self.next_victim % self.instances.len();
        self.next_victim += 1;
        self.instances[victim].crash();
        self.say(&format!("instance {} killed", self.instances[victim].name));
        victim
    }

    /// Starts the instance [`kill_one`](Self::kill_one) killed, at least [`CRASH_AFTER`]
    /// after its kill.
    fn start_again(&mut self, killed: Option<usize>, killed_at: Instant) {
        if let Some(victim) = killed {
            self.sleep(CRASH_AFTER.saturating_sub(killed_at.elapsed()));
            self.instances[victim].start(self.run);
            self.say(&format!("instance {} started again", self.instances[victim].name));
        }
    }

    /// After a fault ended at `back`: waits for the group to commit again on every input
    /// partition, reports how long that took, and keeps the next fault at least
    /// [`BETWEEN_FAULTS`] away.
    fn recovered(&mut self, what: String, back: Instant) {
        let r = recovery(self.run, None, self.instances);
        self.say(&format!(
            "after {what}: committed offsets moved again {:.1} s after the broker was back, on \
             every input partition after {:.1} s",
            r.first.as_secs_f64(),
            r.all.as_secs_f64()
        ));
        self.recoveries.push(r);
        self.sleep(BETWEEN_FAULTS.saturating_sub(back.elapsed()));
    }

    /// `verb` on `node` (`pause`, `restart`, ...), an instance killed meanwhile where asked.
    fn node_fault(&mut self, verb: &str, node: u32, what: String) {
        let at = Instant::now();
        let killed = self.kill_one();
        self.cluster.on(verb, node);
        let back = Instant::now();
        self.start_again(killed, at);
        self.recovered(what, back);
    }

    /// A bounce (SIGKILL, then a start once the controller fenced it) of `node`, an
    /// instance killed between the two where asked.
    fn bounce(&mut self, node: u32, what: String) {
        if !self.kill_instances {
            return self.node_fault("bounce", node, what);
        }
        self.cluster.on("kill", node);
        let at = Instant::now();
        let killed = self.kill_one();
        self.cluster.on("start-node", node);
        let back = Instant::now();
        self.start_again(killed, at);
        self.recovered(what, back);
    }

    /// `pause` of `node` for `pause`, an instance killed and started again during it
    /// where asked (always with `kill_anyway`).
    fn pause(&mut self, node: u32, pause: Duration, kill_anyway: bool, what: String) {
        self.cluster.on("pause", node);
        let resume_at = Instant::now() + pause;
        if self.kill_instances || kill_anyway {
            self.sleep(CRASH_AFTER);
            let at = Instant::now();
            let killed = self.kill_next();
            self.start_again(Some(killed), at);
        }
        self.sleep(resume_at.saturating_duration_since(Instant::now()));
        self.cluster.on("resume", node);
        self.recovered(what, Instant::now());
    }

    /// Every node made unreachable by `down` for `how_long` and brought back by `up`; an
    /// instance killed during it where asked, and started again once the cluster is back
    /// (an instance that starts against no broker at all gives up creating its topics).
    fn all_down(&mut self, how_long: Duration, down: &str, up: impl FnOnce(&Cluster), what: String) {
        for node in 1..=3 {
            self.cluster.on(down, node);
        }
        let at = Instant::now();
        let killed = self.kill_one();
        self.sleep(how_long);
        up(self.cluster);
        let back = Instant::now();
        self.start_again(killed, at);
        self.recovered(what, back);
    }

    /// Injects `faults`, each followed by the wait for the group to commit again.
    pub(crate) fn inject(&mut self, faults: Faults) {
        let input = self.run.topics.input.clone();
        match faults {
            Faults::Bounces(rounds) => {
                for round in 0..rounds {
                    let partition = round as i32 % crate::PARTITIONS;
                    let node = self.cluster.leader(&input, partition);
                    let what = format!(
                        "bounce {} of {rounds}: node {node} (leader of input partition {partition})",
                        round + 1
                    );
                    self.bounce(node, what);
                }
            }
            Faults::Pause(pause) => {
                let node = self.cluster.leader(&input, 0);
                let what = format!("a pause of {pause:?}: node {node} (leader of input partition 0)");
                self.pause(node, pause, false, what);
            }
            Faults::ControllerBounces(rounds) => {
                for round in 0..rounds {
                    let node: u32 = self
                        .cluster
                        .run(&["controller"], false)
                        .trim()
                        .parse()
                        .expect("the active controller's node id");
                    let what = format!("controller bounce {} of {rounds}: node {node}", round + 1);
                    self.bounce(node, what);
                }
            }
            Faults::PauseGroupCoordinator(pause) => {
                let node = self.cluster.group_coordinator(&self.run.app);
                let what = format!("a pause of {pause:?}: node {node} (the group coordinator)");
                self.pause(node, pause, false, what);
            }
            Faults::PauseAndKillInstance(pause) => {
                let node = self.cluster.leader(&input, 0);
                let what = format!(
                    "a pause of {pause:?} of node {node} (leader of input partition 0), an \
                     instance killed and started again during it"
                );
                self.pause(node, pause, true, what);
            }
            Faults::PauseOnlyBootstrap => {
                let node = self.only_bootstrap.expect("chosen at the start");
                self.cluster.on("pause", node);
                let paused = Instant::now();
                let killed = self.kill_one();
                let r = recovery(self.run, None, self.instances);
                self.say(&format!(
                    "with node {node}, the only bootstrap broker and the group coordinator, \
                     paused: committed offsets moved again {:.1} s after the pause, on every \
                     input partition after {:.1} s",
                    r.first.as_secs_f64(),
                    r.all.as_secs_f64()
                ));
                self.sleep(BETWEEN_FAULTS.saturating_sub(paused.elapsed()));
                self.cluster.on("resume", node);
                let back = Instant::now();
                self.start_again(killed, paused);
                self.recovered(format!("node {node} resumed"), back);
            }
            Faults::PauseCoordinatorMidRebalance(pause) => {
                let node = self.cluster.group_coordinator(&self.run.app);
                let last = self.instances.len() - 1;
                self.instances[last].start(self.run);
                let after = Duration::from_millis(env_number("CLUSTER_REBALANCE_PAUSE_AFTER_MS", 1500));
                self.sleep(after);
                let what = format!(
                    "a pause of {pause:?}: node {node} (the group coordinator), {after:?} after C started"
                );
                self.pause(node, pause, false, what);
            }
            Faults::RollingRestart => {
                for node in 1..=3 {
                    self.node_fault("restart", node, format!("a clean restart of node {node}"));
                }
            }
            Faults::PauseAll(pause) => {
                let what = format!("every node paused for {pause:?}");
                self.all_down(pause, "pause", |c| (1..=3).for_each(|n| c.on("resume", n)), what);
            }
            Faults::KillAll(down) => {
                let what = format!("every node killed and down for {down:?}");
                self.all_down(down, "kill", |c| drop(c.run(&["ensure"], true)), what);
            }
        }
    }
}
