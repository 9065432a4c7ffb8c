// onnxruntime-node 1.31's declarations (dist/binding.d.ts, for an internal test callback) name Node's `Buffer`
// without referencing @types/node, so a consumer without Node's types cannot compile them. This consumer has no
// ambient types on purpose ("types": []): it declares the one name ORT needs, as such a user would.
interface Buffer extends Uint8Array {}
