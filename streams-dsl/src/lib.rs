//! The KStream / KTable DSL, compiled down to the Processor API of `streams-core`.
