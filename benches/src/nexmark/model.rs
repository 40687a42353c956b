//! The three Nexmark event types and the JSON both implementations read and write.
//!
//! One topic carries all events: each value is an object with exactly one of the fields
//! `person`, `auction` or `bid` (`{"bid":{"auction":1007,...}}`), field names in camelCase,
//! times in epoch milliseconds. The Java side (`benches/java/.../Nexmark.java`) maps the
//! same JSON onto plain classes with Jackson.

use serde::{Deserialize, Serialize};

/// A new user of the auction site.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Person {
    /// Unique, from 1000 up.
    pub id: u64,
    /// The full name.
    pub name: String,
    /// An e-mail address.
    pub email_address: String,
    /// Four groups of four digits.
    pub credit_card: String,
    /// A US city.
    pub city: String,
    /// A US state code (`OR`, `ID`, `CA`, ...).
    pub state: String,
    /// Event time (ms).
    pub date_time: i64,
    /// Padding to the specification's average size.
    /// Padding to the specification's average size.
    pub extra: String,
}

/// An item put up for auction.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Auction {
    /// Unique, from 1000 up.
    pub id: u64,
    /// The item's name.
    pub item_name: String,
    /// The item's description.
    pub description: String,
    /// The starting price (cents).
    pub initial_bid: u64,
    /// The lowest price the seller accepts (cents).
    pub reserve: u64,
    /// Event time (ms).
    pub date_time: i64,
    /// When the auction closes (ms).
    pub expires: i64,
    /// The [`Person`] selling.
    pub seller: u64,
    /// From 10 to 14.
    pub category: u64,
    /// Padding to the specification's average size.
    pub extra: String,
}

/// A bid on an auction.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Bid {
    /// The [`Auction`] bid on.
    pub auction: u64,
    /// The [`Person`] bidding.
    pub bidder: u64,
    /// In cents.
    pub price: u64,
    /// Where the bid came from.
    pub channel: String,
    /// The page the bid was made on.
    pub url: String,
    /// Event time (ms).
    pub date_time: i64,
    /// Padding to the specification's average size.
    pub extra: String,
}

/// One event of the stream.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Event {
    /// A new user.
    Person(Person),
    /// A new auction.
    Auction(Auction),
    /// A bid.
    Bid(Bid),
}

impl Event {
    /// The event's time (ms).
    pub fn date_time(&self) -> i64 {
        match self {
            Event::Person(p) => p.date_time,
            Event::Auction(a) => a.date_time,
            Event::Bid(b) => b.date_time,
        }
    }

    /// The bid, if this is one.
    pub fn bid(self) -> Option<Bid> {
        match self {
            Event::Bid(b) => Some(b),
            _ => None,
        }
    }

    /// The auction, if this is one.
    pub fn auction(self) -> Option<Auction> {
        match self {
            Event::Auction(a) => Some(a),
            _ => None,
        }
    }

    /// The person, if this is one.
    pub fn person(self) -> Option<Person> {
        match self {
            Event::Person(p) => Some(p),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_the_event_type_and_uses_camel_case() {
        let bid = Event::Bid(Bid {
            auction: 1007,
            bidder: 1001,
            price: 512,
            channel: "Google".into(),
            url: "https://example.com".into(),
            date_time: 5,
            extra: String::new(),
        });
        let json = serde_json::to_string(&bid).unwrap();
        assert_eq!(
            json,
            r#"{"bid":{"auction":1007,"bidder":1001,"price":512,"channel":"Google","url":"https://example.com","dateTime":5,"extra":""}}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&json).unwrap(), bid);
    }
}
