// Extra sample texts for the Gemma tokenizers (appended to samples.js by gen.js): the chat
// markers, Gemma's other added tokens (control, <unusedN>, user-defined HTML tags, runs of
// newlines, tabs and spaces), a literal U+2581, characters only byte fallback can encode, and
// convert's multilingual interop sample.
module.exports = [
  "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n",
  "<bos><start_of_turn>system\nBe brief.\n\nHi<end_of_turn><eos>",
  "x<pad>y<unk>z<mask>w [multimodal] <2mass> [@BOS@] <unused0><unused99> <start_of_image><end_of_image><image_soft_token>",
  "<b>bold</b> <i>it</i> <table><tr><td>1</td></tr></table> <h1>T</h1><code>x</code>",
  "a\tb\t\tc\t\t\t\td  e   f                                  g\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nh",
  "▁x ▁▁y\u2581\u2581\u2581z",
  "\u0001\u001f\u007f \udbff\udfff \uf8ff \ufffd \u{10ffff} 𝔾𝕠𝕠𝕕 ﷽",
  "हिन्दी ไทย ქართული Ἀθῆναι עִבְרִית",
  "Hello world! It's 2026, and I'll pay $1,234.56 for 3 cafés.\n" +
    "def f(x):\n    return x**2  # square\n\tif x >= 10: print(\"big\")\n" +
    "日本語のテキストと中文混合。 한국어도 있어요.\n" +
    "Emoji: 🤖🚀👍🏽 and flags 🇫🇷.   Runs   of     spaces, tabs\t\tand\n\n\nnewlines.\n" +
    "Ünïcödé àccents, Ελληνικά, русский текст, العربية.   12345678901234567890",
];
