// The reference GPT-2 encoder for tests/tokenizer: the Encoder.js of the npm package gpt-3-encoder
// (fetched by scripts/setup.sh). Reads a JSON array of strings on stdin and prints a JSON array of
// their id arrays.
//   node gpt2_reference.js <directory of Encoder.js> < texts.json
const path = require('path');
const fs = require('fs');
const { encode } = require(path.resolve(process.argv[2], 'Encoder.js'));
const texts = JSON.parse(fs.readFileSync(0, 'utf-8'));
process.stdout.write(JSON.stringify(texts.map(encode)));
