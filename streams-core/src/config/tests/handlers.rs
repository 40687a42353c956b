//! The exception handlers' properties, and the dead-letter topic they may need.

use super::{fails_on, with_app};
use crate::model::handlers::ErrorHandling;

#[test]
fn handlers_are_checked() {
    for key in [
        "deserialization.exception.handler",
        "default.deserialization.exception.handler",
        "processing.exception.handler",
        "production.exception.handler",
        "default.production.exception.handler",
    ] {
        let m = fails_on(with_app(&[(key, "bogus")]), key);
        assert!(m.contains("`bogus`") && m.contains("log_and_continue"), "{m}");
        let m = fails_on(with_app(&[(key, "dead_letter_queue")]), key);
        let dlq = with_app(&[
            (key, "dead_letter_queue"),
            ("errors.dead.letter.queue.topic.name", "dlq"),
        ]);
        assert!(m.contains("errors.dead.letter.queue.topic.name"), "{m}");
        assert!(dlq.is_ok(), "{key}: {dlq:?}");
        if key.contains("production") {
            // Under exactly-once too: the refused record's transaction is aborted and the
            // record dead-lettered when its input is processed again.
            let eos = with_app(&[
                (key, "dead_letter_queue"),
                ("errors.dead.letter.queue.topic.name", "dlq"),
                ("processing.guarantee", "exactly_once_v2"),
            ]);
            assert!(eos.is_ok(), "{key}: {eos:?}");
        }
    }
    // Kafka Streams' class names, with or without their package.
    let c = with_app(&[
        (
            "default.deserialization.exception.handler",
            "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
        ),
        (
            "processing.exception.handler",
            "LogAndContinueProcessingExceptionHandler",
        ),
        ("production.exception.handler", "LogAndFailExceptionHandler"),
    ])
    .unwrap();
    assert_eq!(
        c.deserialization_exception_handler(),
        ErrorHandling::LogAndContinue
    );
    assert_eq!(c.processing_exception_handler(), ErrorHandling::LogAndContinue);
    assert_eq!(c.production_exception_handler(), ErrorHandling::LogAndFail);
    // The new name wins over the deprecated one.
    let c = with_app(&[
        ("default.deserialization.exception.handler", "log_and_continue"),
        ("deserialization.exception.handler", "log_and_fail"),
    ])
    .unwrap();
    assert_eq!(c.deserialization_exception_handler(), ErrorHandling::LogAndFail);
    // A dead-letter topic without a dead-letter handler is allowed.
    assert!(with_app(&[("errors.dead.letter.queue.topic.name", "dlq")]).is_ok());
    fails_on(
        with_app(&[("errors.dead.letter.queue.topic.name", "bad topic")]),
        "errors.dead.letter.queue.topic.name",
    );
    fails_on(
        with_app(&[("errors.dead.letter.queue.topic.name", "")]),
        "errors.dead.letter.queue.topic.name",
    );
}
