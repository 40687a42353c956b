package dev.streams.bench;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.time.Duration;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.WallclockTimestampExtractor;

/**
 * The Kafka Streams side of the Nexmark queries: the twins of benches/src/nexmark/queries.rs,
 * written with the DSL as its users would, writing the same records (see the table in
 * benches/src/nexmark/mod.rs). Events are JSON ({"bid":{...}}), read with Jackson; the
 * record timestamp is the event time.
 */
final class Nexmark {
    private Nexmark() {}

    /** The lateness every windowed query accepts (queries.rs: GRACE). */
    static final Duration GRACE = Duration.ofSeconds(30);

    static final ObjectMapper JSON = new ObjectMapper()
            .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false)
            .setSerializationInclusion(JsonInclude.Include.NON_NULL);

    public static final class Person {
        public long id;
        public String name;
        public String emailAddress;
        public String creditCard;
        public String city;
        public String state;
        public long dateTime;
        public String extra;
    }

    public static final class Auction {
        public long id;
        public String itemName;
        public String description;
        public long initialBid;
        public long reserve;
        public long dateTime;
        public long expires;
        public long seller;
        public long category;
        public String extra;
    }

    public static final class Bid {
        public long auction;
        public long bidder;
        public long price;
        public String channel;
        public String url;
        public long dateTime;
        public String extra;

        Bid copy() {
            Bid b = new Bid();
            b.auction = auction;
            b.bidder = bidder;
            b.price = price;
            b.channel = channel;
            b.url = url;
            b.dateTime = dateTime;
            b.extra = extra;
            return b;
        }
    }

    /** One event: exactly one of the three fields is set. */
    public static final class Event {
        public Person person;
        public Auction auction;
        public Bid bid;
    }

    /** An auction's number of bids in one window (q5). */
    public static final class AuctionCount {
        public long auction;
        public long count;

        public AuctionCount() {}

        AuctionCount(long auction, long count) {
            this.auction = auction;
            this.count = count;
        }
    }

    /** A bid's price on an auction, with what q4 and q6 need of the auction. */
    public static final class AuctionPrice {
        public long auction;
        public long category;
        public long seller;
        public long expires;
        public long price;
        public boolean inTime;

        public AuctionPrice() {}

        AuctionPrice(Auction a, Bid bid) {
            auction = a.id;
            category = a.category;
            seller = a.seller;
            expires = a.expires;
            price = bid.price;
            inTime = bid.dateTime <= a.expires;
        }
    }

    /** A seller's auctions with a winning bid (q6). */
    public static final class SellerAuctions {
        public java.util.List<AuctionPrice> all = new java.util.ArrayList<>();

        SellerAuctions without(long auction) {
            SellerAuctions s = new SellerAuctions();
            for (AuctionPrice a : all) {
                if (a.auction != auction) {
                    s.all.add(a);
                }
            }
            return s;
        }

        SellerAuctions with(AuctionPrice w) {
            SellerAuctions s = without(w.auction);
            s.all.add(w);
            return s;
        }

        /** The average price of the 10 auctions that close last (ties: the greater id first). */
        String lastTenAverage() {
            java.util.List<AuctionPrice> byClose = new java.util.ArrayList<>(all);
            byClose.sort((x, y) -> x.expires != y.expires
                    ? Long.compare(y.expires, x.expires) : Long.compare(y.auction, x.auction));
            long sum = 0;
            int n = Math.min(10, byClose.size());
            for (int i = 0; i < n; i++) {
                sum += byClose.get(i).price;
            }
            return n == 0 ? null : Long.toString(sum / n);
        }
    }

    /** A sum and a count, for an average (q4). */
    public static final class SumCount {
        public long sum;
        public long count;

        SumCount plus(long price) {
            SumCount s = new SumCount();
            s.sum = sum + price;
            s.count = count + 1;
            return s;
        }

        SumCount minus(long price) {
            SumCount s = new SumCount();
            s.sum = sum - price;
            s.count = count - 1;
            return s;
        }
    }

    /** How long after its start q4 and q6 look for an auction's bids (queries.rs: AUCTION_WINDOW). */
    static final Duration AUCTION_WINDOW = Duration.ofSeconds(20);

    /** A Jackson serde for {@code type}. */
    static <T> Serde<T> json(Class<T> type) {
        Serializer<T> ser = (topic, value) -> {
            if (value == null) {
                return null;
            }
            try {
                return JSON.writeValueAsBytes(value);
            } catch (IOException e) {
                throw new SerializationException(e);
            }
        };
        Deserializer<T> de = (topic, bytes) -> {
            if (bytes == null) {
                return null;
            }
            try {
                return JSON.readValue(bytes, type);
            } catch (IOException e) {
                throw new SerializationException(e);
            }
        };
        return Serdes.serdeFrom(ser, de);
    }

    static KStream<String, Event> events(StreamsBuilder b, String input) {
        return b.stream(input, Consumed.with(Serdes.String(), json(Event.class)));
    }

    static KStream<String, Bid> bids(StreamsBuilder b, String input) {
        return events(b, input).filter((k, e) -> e.bid != null).mapValues(e -> e.bid);
    }

    static TimeWindows windows(Duration size) {
        return TimeWindows.ofSizeAndGrace(size, GRACE);
    }

    /** Per auction, its highest bid from its start to its close (q4, q6). */
    static KTable<Long, AuctionPrice> winningBids(StreamsBuilder b, String input) {
        KStream<String, Event> events = events(b, input);
        KStream<Long, Auction> auctions = events
                .filter((k, e) -> e.auction != null)
                .map((k, e) -> KeyValue.pair(e.auction.id, e.auction));
        KStream<Long, Bid> bids = events
                .filter((k, e) -> e.bid != null)
                .map((k, e) -> KeyValue.pair(e.bid.auction, e.bid));
        return auctions.join(bids, AuctionPrice::new,
                        JoinWindows.ofTimeDifferenceAndGrace(AUCTION_WINDOW, GRACE).before(Duration.ZERO),
                        StreamJoined.with(Serdes.Long(), json(Auction.class), json(Bid.class)))
                .filter((k, w) -> w.inTime)
                .groupByKey(Grouped.with(Serdes.Long(), json(AuctionPrice.class)))
                .reduce((a, w) -> w.price > a.price ? w : a);
    }

    static Topology topology(String query, String input, String output) {
        StreamsBuilder b = new StreamsBuilder();
        Produced<String, String> strings = Produced.with(Serdes.String(), Serdes.String());
        switch (query) {
            case "q0":
                bids(b, input).to(output, Produced.with(Serdes.String(), json(Bid.class)));
                break;
            case "q1":
                bids(b, input)
                        .mapValues(bid -> {
                            Bid euro = bid.copy();
                            euro.price = bid.price * 89 / 100;
                            return euro;
                        })
                        .to(output, Produced.with(Serdes.String(), json(Bid.class)));
                break;
            case "q2":
                bids(b, input)
                        .filter((k, bid) -> bid.auction % 123 == 0)
                        .mapValues(bid -> bid.auction + "," + bid.price)
                        .to(output, strings);
                break;
            case "q3": {
                KStream<String, Event> events = events(b, input);
                KTable<Long, Person> people = events
                        .filter((k, e) -> e.person != null)
                        .mapValues(e -> e.person)
                        .filter((k, p) -> p.state.equals("OR") || p.state.equals("ID") || p.state.equals("CA"))
                        .selectKey((k, p) -> p.id)
                        .groupByKey(Grouped.with(Serdes.Long(), json(Person.class)))
                        .reduce((old, latest) -> latest);
                KTable<Long, Auction> auctions = events
                        .filter((k, e) -> e.auction != null)
                        .mapValues(e -> e.auction)
                        .filter((k, a) -> a.category == 10)
                        .selectKey((k, a) -> a.id)
                        .groupByKey(Grouped.with(Serdes.Long(), json(Auction.class)))
                        .reduce((old, latest) -> latest);
                auctions.join(people, a -> a.seller,
                                (a, p) -> p.name + "," + p.city + "," + p.state + "," + a.id,
                                Materialized.with(Serdes.Long(), Serdes.String()))
                        .toStream()
                        .map((id, v) -> KeyValue.pair(Long.toString(id), v))
                        .to(output, strings);
                break;
            }
            case "q4":
                winningBids(b, input)
                        .groupBy((k, w) -> KeyValue.pair(w.category, w.price), Grouped.with(Serdes.Long(), Serdes.Long()))
                        .aggregate(SumCount::new, (k, price, s) -> s.plus(price), (k, price, s) -> s.minus(price),
                                Materialized.with(Serdes.Long(), json(SumCount.class)))
                        .toStream()
                        .map((category, s) -> KeyValue.pair(
                                Long.toString(category), s == null || s.count == 0 ? null : Long.toString(s.sum / s.count)))
                        .to(output, strings);
                break;
            case "q6":
                winningBids(b, input)
                        .groupBy((k, w) -> KeyValue.pair(w.seller, w), Grouped.with(Serdes.Long(), json(AuctionPrice.class)))
                        .aggregate(SellerAuctions::new, (k, w, s) -> s.with(w), (k, w, s) -> s.without(w.auction),
                                Materialized.with(Serdes.Long(), json(SellerAuctions.class)))
                        .toStream()
                        .map((seller, s) -> KeyValue.pair(Long.toString(seller), s == null ? null : s.lastTenAverage()))
                        .to(output, strings);
                break;
            case "q5":
                bids(b, input)
                        .selectKey((k, bid) -> bid.auction)
                        .groupByKey(Grouped.with(Serdes.Long(), json(Bid.class)))
                        .windowedBy(windows(Duration.ofSeconds(10)).advanceBy(Duration.ofSeconds(2)))
                        .count()
                        .toStream()
                        .filter((w, count) -> count != null)
                        .map((w, count) -> KeyValue.pair(w.window().start(), new AuctionCount(w.key(), count)))
                        .groupByKey(Grouped.with(Serdes.Long(), json(AuctionCount.class)))
                        .reduce((a, c) -> c.count > a.count || (c.count == a.count && c.auction < a.auction) ? c : a)
                        .toStream()
                        .map((start, top) -> KeyValue.pair(
                                Long.toString(start), top == null ? null : top.auction + "," + top.count))
                        .to(output, strings);
                break;
            case "q7":
                bids(b, input)
                        .selectKey((k, bid) -> "all")
                        .groupByKey(Grouped.with(Serdes.String(), json(Bid.class)))
                        .windowedBy(windows(Duration.ofSeconds(10)))
                        .reduce((a, c) -> higher(c, a) ? c : a)
                        .toStream()
                        .map((w, top) -> KeyValue.pair(
                                Long.toString(w.window().start()),
                                top == null ? null : top.auction + "," + top.bidder + "," + top.price + "," + top.dateTime))
                        .to(output, strings);
                break;
            case "q8": {
                KStream<String, Event> events = events(b, input);
                KTable<Windowed<Long>, String> people = events
                        .filter((k, e) -> e.person != null)
                        .map((k, e) -> KeyValue.pair(e.person.id, e.person.name))
                        .groupByKey(Grouped.with(Serdes.Long(), Serdes.String()))
                        .windowedBy(windows(Duration.ofSeconds(10)))
                        .reduce((first, later) -> first);
                KTable<Windowed<Long>, Long> sellers = events
                        .filter((k, e) -> e.auction != null)
                        .map((k, e) -> KeyValue.pair(e.auction.seller, e.auction.id))
                        .groupByKey(Grouped.with(Serdes.Long(), Serdes.Long()))
                        .windowedBy(windows(Duration.ofSeconds(10)))
                        .count();
                people.join(sellers, (name, auctions) -> name)
                        .toStream()
                        .map((w, name) -> KeyValue.pair(
                                w.key() + "@" + w.window().start(),
                                name == null ? null : w.key() + "," + name + "," + w.window().start()))
                        .to(output, strings);
                break;
            }
            case "q11":
                bids(b, input)
                        .map((k, bid) -> KeyValue.pair(bid.bidder, bid.auction))
                        .groupByKey(Grouped.with(Serdes.Long(), Serdes.Long()))
                        .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(10), GRACE))
                        .count()
                        .toStream()
                        .map((w, n) -> KeyValue.pair(
                                w.key() + "@" + w.window().start() + "/" + w.window().end(),
                                n == null ? null : Long.toString(n)))
                        .to(output, strings);
                break;
            case "q12":
                b.stream(input, Consumed.with(Serdes.String(), json(Event.class))
                                .withTimestampExtractor(new WallclockTimestampExtractor()))
                        .filter((k, e) -> e.bid != null)
                        .map((k, e) -> KeyValue.pair(e.bid.bidder, e.bid.auction))
                        .groupByKey(Grouped.with(Serdes.Long(), Serdes.Long()))
                        .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10)))
                        .count()
                        .toStream()
                        .map((w, n) -> KeyValue.pair(
                                w.key() + "@" + w.window().start(), n == null ? null : Long.toString(n)))
                        .to(output, strings);
                break;
            default:
                throw new IllegalArgumentException("unknown Nexmark query " + query);
        }
        return b.build();
    }

    /** The q7 order: price, then auction, bidder and time, all descending. */
    static boolean higher(Bid c, Bid a) {
        if (c.price != a.price) {
            return c.price > a.price;
        }
        if (c.auction != a.auction) {
            return c.auction > a.auction;
        }
        if (c.bidder != a.bidder) {
            return c.bidder > a.bidder;
        }
        return c.dateTime > a.dateTime;
    }
}
