//! Starting an application under test.

use std::time::Duration;

use streams_core::{KafkaStreams, State};

/// Starts `app` and waits at most `timeout` for it to run; panics (naming its state) if it
/// does not.
pub fn start_running(app: &mut KafkaStreams, timeout: Duration) {
    app.start().unwrap();
    assert!(
        app.wait_for_state(State::Running, timeout),
        "state {:?}",
        app.state()
    );
}
