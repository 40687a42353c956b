"""Confluent's Python client as the reference for the cross-check tests (tests/registry.rs).

Reads one JSON request on stdin and writes one JSON answer on stdout:

  {"op": "serialize", "format": "avro"|"json", "url": URL, "topic": T, "schema": S,
   "records": [...]}                     -> {"frames": [HEX, ...]}
  {"op": "deserialize", "format": "avro"|"json", "url": URL, "topic": T, "schema": S or null,
   "frames": [HEX, ...]}                 -> {"records": [...]}

Values are the topic's record values (subject <topic>-value, TopicNameStrategy); serializing
registers the schema (auto.register.schemas). Deserializing with a schema resolves into it
(Avro reader schema); without one reads with the writer schema.
"""

import json
import sys

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext


def main():
    req = json.load(sys.stdin)
    client = SchemaRegistryClient({"url": req["url"]})
    ctx = SerializationContext(req["topic"], MessageField.VALUE)
    fmt = req["format"]
    if req["op"] == "serialize":
        conf = {"auto.register.schemas": True}
        if fmt == "avro":
            ser = AvroSerializer(schema_registry_client=client, schema_str=req["schema"], conf=conf)
        else:
            ser = JSONSerializer(schema_str=req["schema"], schema_registry_client=client, conf=conf)
        frames = [ser(r, ctx).hex() for r in req["records"]]
        json.dump({"frames": frames}, sys.stdout)
    elif req["op"] == "deserialize":
        if fmt == "avro":
            de = AvroDeserializer(schema_registry_client=client, schema_str=req.get("schema"))
        else:
            de = JSONDeserializer(schema_str=req.get("schema"), schema_registry_client=client)
        records = [de(bytes.fromhex(f), ctx) for f in req["frames"]]
        json.dump({"records": records}, sys.stdout)
    else:
        raise SystemExit("unknown op " + repr(req["op"]))


if __name__ == "__main__":
    main()
