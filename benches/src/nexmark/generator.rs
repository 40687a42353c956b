//! A deterministic Nexmark event generator, to the specification's rules.
//!
//! Event `n` (from 0) is a function of `n` alone: its random choices come from a
//! SplitMix64 stream seeded with `n`, so a range of events can be generated in any order,
//! and every run of the harness sees the same events. Of every 50 events, 1 is a person,
//! 3 are auctions and 46 are bids. Ids start at 1000. Bids go to a hot auction half of the
//! time (else to one of the last 100 auctions, or up to 10 ahead), and come from a hot
//! bidder three quarters of the time (else from one of the last 1000 people, or up to 10
//! ahead); auctions have a hot seller three quarters of the time. Prices are log-uniform
//! between $1 and $1,000,000. Person, auction and bid values are padded (`extra`) to average
//! about 200, 500 and 100 bytes. Event time advances by `1 / events_per_second` per event
//! from `first_event_ms`, in order.

use super::model::{Auction, Bid, Event, Person};

const PERSON_PROPORTION: u64 = 1;
const AUCTION_PROPORTION: u64 = 3;
const TOTAL_PROPORTION: u64 = 50;
const FIRST_PERSON_ID: u64 = 1000;
const FIRST_AUCTION_ID: u64 = 1000;
const FIRST_CATEGORY_ID: u64 = 10;
const NUM_CATEGORIES: u64 = 5;
const NUM_ACTIVE_PEOPLE: u64 = 1000;
const PERSON_ID_LEAD: u64 = 10;
const NUM_IN_FLIGHT_AUCTIONS: u64 = 100;
const AUCTION_ID_LEAD: u64 = 10;
const HOT_AUCTION_RATIO: u64 = 2;
const HOT_SELLER_RATIO: u64 = 4;
const HOT_BIDDER_RATIO: u64 = 4;
const AVG_PERSON_BYTES: usize = 200;
const AVG_AUCTION_BYTES: usize = 500;
const AVG_BID_BYTES: usize = 100;

const FIRST_NAMES: [&str; 11] = [
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
const LAST_NAMES: [&str; 9] = [
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
];
const STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const CITIES: [&str; 10] = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];
const CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];

/// Where event time starts and how fast it runs.
#[derive(Clone, Copy, Debug)]
pub struct Generator {
    /// The time of event 0 (ms).
    pub first_event_ms: i64,
    /// Events per second of event time.
    pub events_per_second: u64,
}

/// SplitMix64: small, fast, and good enough for synthetic data.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }

    /// Lower-case letters, `len` of them.
    fn letters(&mut self, len: usize) -> String {
        (0..len).map(|_| (b'a' + self.below(26) as u8) as char).collect()
    }

    /// Between 3 and `max` letters.
    fn string(&mut self, max: usize) -> String {
        let len = 3 + self.below((max - 2) as u64) as usize;
        self.letters(len)
    }

    /// Cents, log-uniform between $1 and $1,000,000.
    fn price(&mut self) -> u64 {
        (10f64.powf(self.unit() * 6.0) * 100.0).round() as u64
    }

    /// Padding that brings a value of `current` bytes to about `average` (±20 %).
    fn extra(&mut self, current: usize, average: usize) -> String {
        if current >= average {
            return String::new();
        }
        let want = average - current;
        let delta = want / 5;
        let len = want - delta + self.below(2 * delta as u64 + 1) as usize;
        self.letters(len)
    }
}

/// The last person id (from 0) created at or before event `n`.
fn last_person(n: u64) -> u64 {
    let (epoch, offset) = (n / TOTAL_PROPORTION, n % TOTAL_PROPORTION);
    // The person of this epoch (`PERSON_PROPORTION` is 1: the epoch's first event).
    let offset = if offset < PERSON_PROPORTION {
        offset
    } else {
        PERSON_PROPORTION - 1
    };
    epoch * PERSON_PROPORTION + offset
}

/// The last auction id (from 0) created at or before event `n` (0 before the first).
fn last_auction(n: u64) -> u64 {
    let (epoch, offset) = (n / TOTAL_PROPORTION, n % TOTAL_PROPORTION);
    if offset < PERSON_PROPORTION {
        // A person: the last auction was in the previous epoch.
        return (epoch * AUCTION_PROPORTION).saturating_sub(1);
    }
    epoch * AUCTION_PROPORTION + (offset - PERSON_PROPORTION).min(AUCTION_PROPORTION - 1)
}

impl Generator {
    /// Event time starting at `first_event_ms`, `events_per_second` events per second.
    pub fn new(first_event_ms: i64, events_per_second: u64) -> Self {
        Self {
            first_event_ms,
            events_per_second: events_per_second.max(1),
        }
    }

    /// The time of event `n` (ms).
    pub fn timestamp(&self, n: u64) -> i64 {
        self.first_event_ms + (u128::from(n) * 1000 / u128::from(self.events_per_second)) as i64
    }

    /// Event `n`.
    pub fn event(&self, n: u64) -> Event {
        let mut rng = Rng::new(n);
        let ts = self.timestamp(n);
        match n % TOTAL_PROPORTION {
            o if o < PERSON_PROPORTION => Event::Person(self.person(n, ts, &mut rng)),
            o if o < PERSON_PROPORTION + AUCTION_PROPORTION => Event::Auction(self.auction(n, ts, &mut rng)),
            _ => Event::Bid(self.bid(n, ts, &mut rng)),
        }
    }

    /// A person id (from 0) that exists at event `n`, or will soon.
    fn some_person(n: u64, rng: &mut Rng) -> u64 {
        let people = last_person(n) + 1;
        let active = people.min(NUM_ACTIVE_PEOPLE);
        people - active + rng.below(active + PERSON_ID_LEAD)
    }

    /// An auction id (from 0) in flight at event `n`, or soon.
    fn some_auction(n: u64, rng: &mut Rng) -> u64 {
        let last = last_auction(n);
        let min = last.saturating_sub(NUM_IN_FLIGHT_AUCTIONS);
        min + rng.below(last - min + 1 + AUCTION_ID_LEAD)
    }

    fn person(&self, n: u64, ts: i64, rng: &mut Rng) -> Person {
        let name = format!("{} {}", rng.pick(&FIRST_NAMES), rng.pick(&LAST_NAMES));
        let email_address = format!("{}@{}.com", rng.string(7), rng.string(5));
        let credit_card = (0..4)
            .map(|_| format!("{:04}", rng.below(10_000)))
            .collect::<Vec<_>>()
            .join(" ");
        let city = rng.pick(&CITIES).to_owned();
        let state = rng.pick(&STATES).to_owned();
        let size = 8 + name.len() + email_address.len() + credit_card.len() + city.len() + state.len() + 8;
        Person {
            id: last_person(n) + FIRST_PERSON_ID,
            name,
            email_address,
            credit_card,
            city,
            state,
            date_time: ts,
            extra: rng.extra(size, AVG_PERSON_BYTES),
        }
    }

    fn auction(&self, n: u64, ts: i64, rng: &mut Rng) -> Auction {
        let seller = if rng.below(HOT_SELLER_RATIO) > 0 {
            (last_person(n) / HOT_SELLER_RATIO) * HOT_SELLER_RATIO
        } else {
            Self::some_person(n, rng)
        };
        let category = FIRST_CATEGORY_ID + rng.below(NUM_CATEGORIES);
        let initial_bid = rng.price();
        let reserve = initial_bid + rng.price();
        // Open for up to twice the time in which the next 100 auctions are created.
        let events_per_100_auctions = NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION / AUCTION_PROPORTION;
        let horizon = (self.timestamp(n + events_per_100_auctions) - ts).max(1) as u64;
        let expires = ts + 1 + rng.below(2 * horizon) as i64;
        let item_name = rng.string(20);
        let description = rng.string(100);
        let size = 8 + item_name.len() + description.len() + 8 + 8 + 8 + 8 + 8;
        Auction {
            id: last_auction(n) + FIRST_AUCTION_ID,
            item_name,
            description,
            initial_bid,
            reserve,
            date_time: ts,
            expires,
            seller: seller + FIRST_PERSON_ID,
            category,
            extra: rng.extra(size, AVG_AUCTION_BYTES),
        }
    }

    fn bid(&self, n: u64, ts: i64, rng: &mut Rng) -> Bid {
        let auction = if rng.below(HOT_AUCTION_RATIO) > 0 {
            (last_auction(n) / HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO
        } else {
            Self::some_auction(n, rng)
        };
        let bidder = if rng.below(HOT_BIDDER_RATIO) > 0 {
            (last_person(n) / HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO + 1
        } else {
            Self::some_person(n, rng)
        };
        let price = rng.price();
        let (channel, url) = if rng.below(10) > 0 {
            let channel = rng.pick(&CHANNELS).to_owned();
            let url = format!(
                "https://www.nexmark.com/{}/{}/item.htm?query=1",
                rng.string(5),
                rng.string(5)
            );
            (channel, url)
        } else {
            let id = rng.below(10_000);
            let url = format!(
                "https://www.nexmark.com/{}/item.htm?query=1&channel_id={id}",
                rng.string(5)
            );
            (format!("channel-{id}"), url)
        };
        let size = 8 + 8 + 8 + channel.len() + url.len() + 8;
        Bid {
            auction: auction + FIRST_AUCTION_ID,
            bidder: bidder + FIRST_PERSON_ID,
            price,
            channel,
            url,
            date_time: ts,
            extra: rng.extra(size, AVG_BID_BYTES),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_a_function_of_their_number() {
        let g = Generator::new(1_000_000, 10_000);
        for n in [0, 1, 7, 49, 50, 12_345] {
            assert_eq!(g.event(n), g.event(n));
        }
        assert_ne!(g.event(10), g.event(11));
    }

    #[test]
    fn proportions_ids_and_times_follow_the_specification() {
        let g = Generator::new(0, 1000);
        let (mut people, mut auctions, mut bids) = (Vec::new(), Vec::new(), Vec::new());
        for n in 0..50_000 {
            let e = g.event(n);
            assert_eq!(e.date_time(), n as i64, "1000 events per second: 1 ms apart");
            match e {
                Event::Person(p) => people.push(p),
                Event::Auction(a) => auctions.push(a),
                Event::Bid(b) => bids.push(b),
            }
        }
        assert_eq!((people.len(), auctions.len(), bids.len()), (1000, 3000, 46_000));
        // Ids are dense and ascending from 1000.
        assert!(people.iter().enumerate().all(|(i, p)| p.id == 1000 + i as u64));
        assert!(auctions.iter().enumerate().all(|(i, a)| a.id == 1000 + i as u64));
        // Bids name auctions and people that exist, or are at most 10 ahead.
        let (last_auction, last_person) = (auctions.last().unwrap().id, people.last().unwrap().id);
        assert!(
            bids.iter()
                .all(|b| b.auction <= last_auction + 10 && b.bidder <= last_person + 10)
        );
        let hot = bids.iter().filter(|b| b.auction % 2 == 0).count() as f64 / bids.len() as f64;
        assert!(
            hot > 0.6,
            "half the bids go to a hot (even) auction, plus half the rest: {hot}"
        );
        assert!(
            auctions
                .iter()
                .all(|a| (10..15).contains(&a.category) && a.expires > a.date_time)
        );
        assert!(bids.iter().all(|b| (100..=100_000_000).contains(&b.price)));
        let avg = |sizes: Vec<usize>| sizes.iter().sum::<usize>() / sizes.len();
        let bid_json = avg(bids
            .iter()
            .map(|b| serde_json::to_vec(b).unwrap().len())
            .collect());
        assert!(
            (100..200).contains(&bid_json),
            "bid JSON of {bid_json} bytes on average"
        );
    }
}
