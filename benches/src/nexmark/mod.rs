//! Nexmark (an online auction: people, auctions, bids) for the side-by-side harness.
//!
//! [`generator`] makes the events, [`queries`] holds this project's implementation of the
//! queries and `benches/java/src/main/java/dev/streams/bench/Nexmark.java` the Kafka
//! Streams one. Both write the same records, so that their outputs can be compared:
//!
//! | query | output key | output value |
//! |---|---|---|
//! | q0 pass-through | null | the bid's JSON |
//! | q1 currency conversion | null | the bid's JSON, `price` × 89 / 100 |
//! | q2 selection | null | `auction,price` of bids with `auction % 123 == 0` |
//! | q3 local item suggestion | auction | `name,city,state,auction`: category-10 auctions of sellers in OR, ID or CA |
//! | q4 average price per category | category | the average winning bid (rounded down) of its auctions |
//! | q5 hot items | window start (ms) | `auction,count`: the most bid-on auction of the 10 s window (2 s advance) |
//! | q6 average selling price by seller | seller | the average winning bid (rounded down) of the seller's 10 auctions that close last |
//! | q7 highest bid | window start (ms) | `auction,bidder,price,dateTime` of the 10 s window's highest bid |
//! | q8 new users | `id@windowStart` | `id,name,windowStart`: a person who opened an auction in the 10 s window of their registration |
//! | q11 user sessions | `bidder@start/end` | the session's number of bids; null when merged away |
//! | q12 processing-time windows | `bidder@windowStart` | bids in the 10 s window of the wall clock |
//!
//! [`result::Digest`] reduces an output topic to what must be equal: the multiset of
//! records of the stream queries (JSON compared by value), the last value per key of the
//! others, and for q12, whose windows depend on when records were processed, the total
//! per bidder.

pub mod generator;
pub mod model;
pub mod queries;
pub mod result;

pub use generator::Generator;
pub use model::{Auction, Bid, Event, Person};
