// Writes tests/data/tokenizer/gpt2-cases.jsonl: texts and the ids OpenAI's tiktoken gives
// them with its "gpt2" encoding (the npm package `tiktoken`, tiktoken's Rust code compiled
// to WebAssembly), one JSON object a line: {"text", "special", "ids"}. special: true when
// the text was encoded with <|endoftext|> allowed as the special token (encode(text,
// "all")), false for encode_ordinary (the text taken as plain text).
//
//   mkdir scratch && cd scratch && npm install tiktoken@1.0.22
//   NODE_PATH=scratch/node_modules node tools/make-tokenizer-fixtures.js > tests/data/tokenizer/gpt2-cases.jsonl
const { get_encoding } = require("tiktoken");
const fs = require("fs");
const path = require("path");

const texts = [
	"Hello world",
	"Hello  world,   spaced    out\t\ttabs\n\n\nnewlines   ",
	"   leading and trailing   ",
	"\n",
	" ",
	"a\r\nb\r\n\r\nc",
	"I'm, you're, he's, we've, they'll, I'd, don't, can't; I'M, YOU'RE, It'S",
	"'s 'd 'll 've 're 't 'm 'x ''s",
	"1 12 123 1234 12345 1,234,567.89 3.14159 -42 +7 1e-9 0x1F 007",
	"٣٤٥ ۱۲۳ १२३ ½ ² Ⅻ ① 𝟙𝟚",
	"def f(x):\n    return x**2 + 1  # square\n\nif __name__ == \"__main__\":\n\tprint(f(3))\n",
	"int main(void) { for (int i = 0; i < 10; i++) printf(\"%d\\n\", i); return 0; }",
	"<div class=\"a\">&nbsp;<br/></div> {\"k\": [1, 2, null]} x->y && a||b !== c",
	"Ünïcödé façade naïve café résumé Ångström",
	"Привет, мир! Ελληνικά κείμενα. Հայերեն. ქართული",
	"你好，世界。日本語のテキスト、カタカナ。한국어 문장입니다.",
	"مرحبا بالعالم שלום עולם",
	"नमस्ते दुनिया ภาษาไทย ສະບາຍດີ தமிழ் বাংলা",
	"Emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🏳️‍🌈 ✨✨✨",
	"no\u00a0break\u2000en\u2003em\u2009thin\u202fnarrow\u205fmath\u3000ideographic\u1680ogham",
	"line\u2028separator\u2029paragraph\u0085next\u000bvt\u000cff",
	"zero\u200bwidth\u200cnon\u200djoiner\ufeffbom",
	"e\u0301 a\u0308 combining: n\u0303o\u0301",
	"!!! ??? ... --- *** ___ ~~~ ``` ''' \"\"\" ((())) [[]] {{}}",
	"mixed123abc 123abc abc123 a1b2c3 _under_score_ CamelCaseWord",
	"  \n  \n\t \t",
	"word   \n   word",
	"The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX! the lazy dog's bone.",
	"tab\tseparated\tvalues\n1\t2\t3\n",
	"https://example.com/path?query=1&b=2#frag user@example.org",
	"<|endoftext|>",
	"before<|endoftext|>after <|endoftext|> <|endoftext|>\n",
	"",
];
const specialTexts = [
	"<|endoftext|>",
	"before<|endoftext|>after <|endoftext|> <|endoftext|>\n",
	"a <|endoftext|>b<|endoftext|><|endoftext|>",
	"no special here",
];

const enc = get_encoding("gpt2");
const out = [];
for (const t of texts)
	out.push(JSON.stringify({ text: t, special: false, ids: Array.from(enc.encode_ordinary(t)) }));
for (const t of specialTexts)
	out.push(JSON.stringify({ text: t, special: true, ids: Array.from(enc.encode(t, "all")) }));
// a longer English text, when one is given: its ids as one case
if (process.argv[2]) {
	const t = fs.readFileSync(process.argv[2], "utf8");
	out.push(JSON.stringify({ text: t, special: false, ids: Array.from(enc.encode_ordinary(t)) }));
}
enc.free();
process.stdout.write(out.join("\n") + "\n");
