/**
 * A minimal writer of ONNX models (protobuf `ModelProto`, ONNX IR 8), enough
 * to express a small inference graph with float/int weights as initialisers.
 * Used to run the bundled USE-lite weights on onnxruntime (./use-onnx.ts)
 * without shipping a second copy of them: the graph is built in memory from
 * the TF.js weights at load time.
 *
 * Only the protobuf fields ONNX runtimes read for such graphs are written
 * (onnx.proto3 field numbers): ModelProto ir_version 1, producer_name 2,
 * graph 7, opset_import 8; GraphProto node 1, name 2, initializer 5,
 * input 11, output 12; NodeProto input 1, output 2, name 3, op_type 4,
 * attribute 5, domain 7; AttributeProto name 1, f 2, i 3, ints 8, type 20;
 * TensorProto dims 1, data_type 2, name 8, raw_data 9; ValueInfoProto
 * name 1, type 2.
 */

/** ONNX `TensorProto.DataType` codes used here. */
export const OnnxType = { FLOAT: 1, INT8: 3, INT32: 6, INT64: 7 } as const;

/** A node attribute value: a float, an int, or a list of ints. */
export type OnnxAttribute = { f: number } | { i: number } | { ints: number[] };

/** A constant tensor of the graph (an initialiser). */
export interface OnnxTensor {
  name: string;
  dims: number[];
  type: (typeof OnnxType)[keyof typeof OnnxType];
  /** Little-endian element bytes (a typed array of the element type). */
  data: Float32Array | Int32Array | Int8Array | BigInt64Array;
}

/** One operator of the graph. */
export interface OnnxNode {
  op: string;
  inputs: string[];
  outputs: string[];
  attributes?: Record<string, OnnxAttribute>;
  /** Operator domain; `""` (the default) is the standard ONNX domain. */
  domain?: string;
}

/** A graph input or output: its name, element type and dims (a string is a symbolic dim). */
export interface OnnxValue {
  name: string;
  type: (typeof OnnxType)[keyof typeof OnnxType];
  dims: (number | string)[];
}

/** A whole model. */
export interface OnnxGraph {
  name: string;
  nodes: OnnxNode[];
  initializers: OnnxTensor[];
  inputs: OnnxValue[];
  outputs: OnnxValue[];
  /** Opset versions by domain, e.g. `{ "": 17, "com.microsoft": 1 }`. */
  opsets: Record<string, number>;
}

/** Growable byte buffer with protobuf primitives. */
class Writer {
  private chunks: Uint8Array[] = [];
  private scratch: number[] = [];

  private flushScratch(): void {
    if (this.scratch.length > 0) {
      this.chunks.push(Uint8Array.from(this.scratch));
      this.scratch = [];
    }
  }

  varint(value: number | bigint): void {
    // Negative int64 values are written as their 64-bit two's complement (10 bytes).
    let v = BigInt.asUintN(64, BigInt(value));
    while (v >= 0x80n) {
      this.scratch.push(Number((v & 0x7fn) | 0x80n));
      v >>= 7n;
    }
    this.scratch.push(Number(v));
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  int(field: number, value: number | bigint): void {
    this.tag(field, 0);
    this.varint(value);
  }

  float(field: number, value: number): void {
    this.tag(field, 5);
    const bytes = new Uint8Array(4);
    new DataView(bytes.buffer).setFloat32(0, value, true);
    this.scratch.push(...bytes);
  }

  bytes(field: number, value: Uint8Array): void {
    this.tag(field, 2);
    this.varint(value.length);
    this.flushScratch();
    this.chunks.push(value);
  }

  string(field: number, value: string): void {
    this.bytes(field, new TextEncoder().encode(value));
  }

  message(field: number, build: (w: Writer) => void): void {
    const inner = new Writer();
    build(inner);
    this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    this.flushScratch();
    let size = 0;
    for (const c of this.chunks) size += c.length;
    const out = new Uint8Array(size);
    let offset = 0;
    for (const c of this.chunks) {
      out.set(c, offset);
      offset += c.length;
    }
    this.chunks = [out];
    return out;
  }
}

function writeTensor(w: Writer, t: OnnxTensor): void {
  for (const d of t.dims) w.int(1, d);
  w.int(2, t.type);
  w.string(8, t.name);
  w.bytes(9, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
}

function writeValue(w: Writer, v: OnnxValue): void {
  w.string(1, v.name);
  w.message(2, (type) =>
    type.message(1, (tensor) => {
      tensor.int(1, v.type);
      tensor.message(2, (shape) => {
        for (const d of v.dims) {
          shape.message(1, (dim) => {
            if (typeof d === "number") dim.int(1, d);
            else dim.string(2, d);
          });
        }
      });
    }),
  );
}

function writeNode(w: Writer, n: OnnxNode, index: number): void {
  for (const i of n.inputs) w.string(1, i);
  for (const o of n.outputs) w.string(2, o);
  w.string(3, `${n.op}_${index}`);
  w.string(4, n.op);
  for (const [name, value] of Object.entries(n.attributes ?? {})) {
    w.message(5, (a) => {
      a.string(1, name);
      if ("f" in value) {
        a.float(2, value.f);
        a.int(20, 1);
      } else if ("i" in value) {
        a.int(3, value.i);
        a.int(20, 2);
      } else {
        for (const x of value.ints) a.int(8, x);
        a.int(20, 7);
      }
    });
  }
  if (n.domain) w.string(7, n.domain);
}

/**
 * Serialises a graph as an ONNX model (IR version 8).
 * @returns the model bytes, as `onnxruntime`'s `InferenceSession.create` takes them.
 */
export function encodeOnnxModel(graph: OnnxGraph): Uint8Array {
  const w = new Writer();
  w.int(1, 8);
  w.string(2, "knowledge-layer");
  w.message(7, (g) => {
    graph.nodes.forEach((n, i) => {
      g.message(1, (node) => writeNode(node, n, i));
    });
    g.string(2, graph.name);
    for (const t of graph.initializers) g.message(5, (tensor) => writeTensor(tensor, t));
    for (const v of graph.inputs) g.message(11, (value) => writeValue(value, v));
    for (const v of graph.outputs) g.message(12, (value) => writeValue(value, v));
  });
  for (const [domain, version] of Object.entries(graph.opsets)) {
    w.message(8, (o) => {
      if (domain) o.string(1, domain);
      o.int(2, version);
    });
  }
  return w.finish();
}
