"""Confluent's Python client as the reference for the cross-check tests (tests/registry.rs).

Reads one JSON request on stdin and writes one JSON answer on stdout:

  {"op": "serialize", "format": "avro"|"json", "url": URL, "topic": T, "schema": S,
   "records": [...]}                     -> {"frames": [HEX, ...]}
  {"op": "deserialize", "format": "avro"|"json", "url": URL, "topic": T, "schema": S or null,
   "frames": [HEX, ...]}                 -> {"records": [...]}

Values are the topic's record values (subject <topic>-value, TopicNameStrategy); serializing
registers the schema (auto.register.schemas). Deserializing with a schema resolves into it
(Avro reader schema); without one reads with the writer schema.

Protobuf has no schema text here: the request carries the message's file and the files it
imports as serialized FileDescriptorProtos (hex, imports first) and the message's full name;
records are the messages as JSON (protobuf's json_format, field names as declared):

  {"op": "serialize", "format": "protobuf", "url": URL, "topic": T, "files": [HEX, ...],
   "message": NAME, "conf": {...}, "records": [...]}   -> {"frames": [HEX, ...]}
  {"op": "deserialize", "format": "protobuf", "files": [HEX, ...], "message": NAME,
   "frames": [HEX, ...]}                             -> {"records": [...]}
"""

import json
import sys

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext


def protobuf_class(req):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    for f in req["files"]:
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(bytes.fromhex(f)))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(req["message"]))


def protobuf(req, client, ctx):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import json_format

    cls = protobuf_class(req)
    if req["op"] == "serialize":
        ser = ProtobufSerializer(cls, client, conf=req.get("conf") or {})
        msgs = [json_format.ParseDict(r, cls()) for r in req["records"]]
        return {"frames": [ser(m, ctx).hex() for m in msgs]}
    de = ProtobufDeserializer(cls, conf={})
    records = [de(bytes.fromhex(f), ctx) for f in req["frames"]]
    return {
        "records": [
            json_format.MessageToDict(m, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
            for m in records
        ]
    }


def main():
    req = json.load(sys.stdin)
    client = SchemaRegistryClient({"url": req["url"]})
    ctx = SerializationContext(req["topic"], MessageField.VALUE)
    fmt = req["format"]
    if fmt == "protobuf":
        json.dump(protobuf(req, client, ctx), sys.stdout)
    elif req["op"] == "serialize":
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
