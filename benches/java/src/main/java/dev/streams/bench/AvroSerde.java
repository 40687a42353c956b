package dev.streams.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serializer;

/**
 * Generic Avro records in the Confluent wire format (magic byte 0, 4-byte schema id, Avro
 * binary), with Apache Avro's own library and a schema registry reached over HTTP: what
 * Confluent's serializers do, written here because their jars are not on Maven Central.
 *
 * <p>Writing registers the writer schema under its record name (RecordNameStrategy) once
 * and caches the id; reading fetches each writer schema by id once and caches it. Per
 * record, both sides only encode or decode.
 */
final class AvroSerde {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String CONTENT_TYPE = "application/vnd.schemaregistry.v1+json";

    private final String url;
    private final Schema schema;
    /** The schema's text as given: what is registered, so the id is the one other writers of the same text get. */
    private final String text;
    private final HttpClient http = HttpClient.newHttpClient();
    private final Map<Integer, GenericDatumReader<GenericRecord>> readers = new ConcurrentHashMap<>();
    private volatile int writerId = -1;

    AvroSerde(String url, String schema) {
        this.url = url;
        this.schema = new Schema.Parser().parse(schema);
        this.text = schema;
    }

    private JsonNode call(HttpRequest.Builder request) {
        try {
            HttpResponse<String> r = http.send(
                    request.header("Accept", CONTENT_TYPE).build(), HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() / 100 != 2) {
                throw new SerializationException("schema registry answered " + r.statusCode() + ": " + r.body());
            }
            return JSON.readTree(r.body());
        } catch (IOException e) {
            throw new SerializationException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new SerializationException(e);
        }
    }

    private int writerId() {
        int id = writerId;
        if (id < 0) {
            String body;
            try {
                body = JSON.writeValueAsString(Map.of("schema", text));
            } catch (IOException e) {
                throw new SerializationException(e);
            }
            JsonNode answer = call(HttpRequest.newBuilder(URI.create(url + "/subjects/" + schema.getFullName() + "/versions"))
                    .header("Content-Type", CONTENT_TYPE)
                    .POST(HttpRequest.BodyPublishers.ofString(body)));
            id = answer.get("id").asInt();
            writerId = id;
        }
        return id;
    }

    private GenericDatumReader<GenericRecord> reader(int id) {
        return readers.computeIfAbsent(id, i -> {
            JsonNode answer = call(HttpRequest.newBuilder(URI.create(url + "/schemas/ids/" + i)).GET());
            Schema writer = new Schema.Parser().parse(answer.get("schema").asText());
            return new GenericDatumReader<>(writer, schema);
        });
    }

    Serializer<GenericRecord> serializer() {
        GenericDatumWriter<GenericRecord> writer = new GenericDatumWriter<>(schema);
        return new Serializer<>() {
            private BinaryEncoder encoder;

            @Override
            public byte[] serialize(String topic, GenericRecord record) {
                if (record == null) {
                    return null;
                }
                ByteArrayOutputStream out = new ByteArrayOutputStream(128);
                out.write(0);
                out.writeBytes(ByteBuffer.allocate(4).putInt(writerId()).array());
                encoder = EncoderFactory.get().binaryEncoder(out, encoder);
                try {
                    writer.write(record, encoder);
                    encoder.flush();
                } catch (IOException e) {
                    throw new SerializationException(e);
                }
                return out.toByteArray();
            }
        };
    }

    Deserializer<GenericRecord> deserializer() {
        return new Deserializer<>() {
            private BinaryDecoder decoder;

            @Override
            public GenericRecord deserialize(String topic, byte[] bytes) {
                if (bytes == null) {
                    return null;
                }
                if (bytes.length < 5 || bytes[0] != 0) {
                    throw new SerializationException("not the schema registry wire format");
                }
                int id = ByteBuffer.wrap(bytes, 1, 4).getInt();
                decoder = DecoderFactory.get().binaryDecoder(bytes, 5, bytes.length - 5, decoder);
                try {
                    return reader(id).read(null, decoder);
                } catch (IOException e) {
                    throw new SerializationException(e);
                }
            }
        };
    }
}
