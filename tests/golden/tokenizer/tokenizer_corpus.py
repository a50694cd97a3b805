"""Deterministic multilingual test corpus for the tokenizer acceptance tests (no data files).

corpus(seed, target_bytes) returns a list of documents whose UTF-8 size adds up to at least
target_bytes: many scripts, emoji sequences, combining marks (composed and decomposed, so NFC
matters), code, whitespace runs and CRLF, special-token strings inside text, and random assigned
code points (Unicode version of this Python's unicodedata, 14.0 on Python 3.11).
"""
import random
import sys
import unicodedata

SPECIAL_STRINGS = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<|vision_start|>", "<|image_pad|>", "<tool_response>", "<|fim_prefix|>",
    # near misses and overlaps: must not become special tokens
    "<|im_sta", "<|im_start|", "<|im_start||>", "<<|im_end|>>", "<|im_end|><|im_start|>", "< think>",
    "<think></think>", "<|IM_START|>",
]

# (alphabet, word length range) per script; words are random letter strings.
SCRIPTS = {
    "latin": ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", (1, 10)),
    "latin_diacritics": ("àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿăąćčďđęěğıłńňőœřśşšţťůűźżžșțẞßÀÉÎÕÜŁŚŽ"
                          "ảạấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ", (1, 9)),
    "cyrillic": ("абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЁЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯіїєґў", (1, 12)),
    "greek": ("αβγδεζηθικλμνξοπρστυφχψωάέήίόύώϊϋΐΰςΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ", (1, 10)),
    "arabic": ("ابتثجحخدذرزسشصضطظعغفقكلمنهويءآأؤإئةى" + "\u064b\u064c\u064d\u064e\u064f\u0650\u0651\u0652", (2, 9)),
    "hebrew": ("אבגדהוזחטיכךלמםנןסעפףצץקרשת" + "\u05b0\u05b4\u05b7\u05b8\u05bc\u05c1", (2, 8)),
    "devanagari": ("अआइईउऊएऐओऔकखगघङचछजझञटठडढणतथदधनपफबभमयरलवशषसह" + "\u093e\u093f\u0940\u0941\u0942\u0947\u0948\u094b\u094c\u094d\u0902\u0903\u093c", (2, 10)),
    "thai": ("กขคฆงจฉชซฌญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหฬอฮะาำเแโใไ" + "\u0e31\u0e34\u0e35\u0e36\u0e37\u0e38\u0e39\u0e47\u0e48\u0e49\u0e4a\u0e4b", (3, 14)),
    "cjk": ("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切" , (1, 6)),
    "kana": ("あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんがぎぐげござじずぜぞだぢづでどばびぶべぼぱぴぷぺぽアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲンガギグゲゴーッャュョ", (1, 8)),
    "hangul": ("가각간갈감갑강개객거건걸검게겨격견결경계고곡곤골공과관광괴교구국군굴궁권귀규균그극근글금급기긴길김나낙난날남납낭내너널네녀년념녕노녹논놀농뇌누눈늘능니다단달담답당대더덕도독돈돌동두둑둘뒤드득들등디따때또라락란람랑래량러럭런럴레려력련렬령례로록론롤뢰료루류륙륜률르른를름릇리린림립마막만말망매머먹메며면명모목몰몸못무묵문물미민밀바박반발방배백버번벌범법벽변별병보복본봉부북분불붕비빈빌빛사", (1, 5)),
}

PUNCT = list(".,;:!?…—–-()[]{}«»“”‘’\"'/%&*#@+=|~^`$€£¥₹。、！？：；「」『』（）【】《》・·،؛؟।॥")
SPACES = [" ", " ", " ", " ", "  ", "\t", "\n", "\r\n", "\n\n", "   ", " \t", "\u00a0", "\u3000", "\u2009",
          "\u202f", "\u2028", "\u0085", "\u180e", " \u180e ", "\u200b", "\u1680", "\u205f", " \n ", "\t\t\n"]
EMOJI_BASE = ["😀", "😂", "🥲", "😍", "🤔", "🙈", "👍", "👋", "🎉", "🔥", "💯", "❤", "❤️", "✨", "🚀", "🌍", "🍕",
              "☕", "⚡", "✅", "❌", "⭐", "🐍", "🦀", "🧠", "🏳️‍🌈", "🏴‍☠️", "1️⃣", "#️⃣", "©️", "™"]
SKIN_TONES = ["\U0001F3FB", "\U0001F3FC", "\U0001F3FD", "\U0001F3FE", "\U0001F3FF"]
TONED = ["👍", "👋", "🧑", "👩", "👨", "🙌", "💪", "🤝", "🧑‍💻"]
ZWJ_SEQUENCES = ["👨‍👩‍👧‍👦", "👩‍❤️‍👨", "🧑‍🤝‍🧑", "👩‍🔬", "🧑🏽‍🚀", "👁️‍🗨️", "🐕‍🦺", "🐻‍❄️", "😶‍🌫️", "❤️‍🔥", "🧔🏻‍♀️"]
FLAGS = ["🇺🇸", "🇫🇷", "🇯🇵", "🇩🇪", "🇧🇷", "🇮🇳", "🇺🇦", "🇰🇷", "🇪🇺", "🇺🇳", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🏴󠁧󠁢󠁷󠁬󠁳󠁿"]
COMBINING = [chr(c) for c in range(0x300, 0x370)] + ["\u0483", "\u05b0", "\u0610", "\u093c", "\u0e48",
                                                     "\u1ab0", "\u1dc0", "\u20d0", "\u20e3", "\ufe20", "\u302a", "\u3099"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'D", "’s", "'ſ",
                "'K", "'\u212a", "'x", "''s", "'"]

CODE_SNIPPETS = [
    'def f(x, y=2):\n    """Doc."""\n    return {"a": [x**2, y // 3], \'b\': None}\n',
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <vector>\nstd::vector<int> v{1, 2, 3};  // comment\nauto it = v.begin();\n",
    "const f = async (a) => { await fetch(`/api/${a}?q=1&r=2`); };\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%é%';\n",
    "<div class=\"x\"><p>Hello &amp; welcome</p></div>\n",
    "if x != nil {\n\treturn fmt.Errorf(\"bad: %w\", err)\n}\n",
    "    \n        deeply.indented(call)  \n\t\t# tab indented\r\n",
    "fn main() -> Result<(), Box<dyn Error>> { println!(\"{:?}\", vec![1u8; 4]); Ok(()) }\n",
    "$ ls -la | grep '^d' > out.txt 2>&1\n",
    "x = 3.14159e-10; y = 0xFF_FF; z = 1_000_000; w = .5\n",
    "λx.λy.x y  ∀ε>0 ∃δ>0: |x−a|<δ ⇒ |f(x)−f(a)|<ε\n",
]


def assigned_code_points():
    """Every assigned, non-surrogate code point this Python's Unicode database knows."""
    cps = []
    for cp in range(0x110000):
        cat = unicodedata.category(chr(cp))
        if cat not in ("Cn", "Cs"):
            cps.append(cp)
    return cps


_ASSIGNED = None


def random_code_points(rng, n):
    global _ASSIGNED
    if _ASSIGNED is None:
        _ASSIGNED = assigned_code_points()
    return "".join(chr(rng.choice(_ASSIGNED)) for _ in range(n))


def word(rng, script):
    alphabet, (lo, hi) = SCRIPTS[script]
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def number(rng):
    kind = rng.randrange(5)
    if kind == 0:
        return str(rng.randint(0, 10 ** rng.randint(1, 12)))
    if kind == 1:
        return f"{rng.uniform(-1e4, 1e4):.{rng.randint(0, 6)}f}"
    if kind == 2:
        return "".join(rng.choice("٠١٢٣٤٥٦٧٨٩") for _ in range(rng.randint(1, 5)))
    if kind == 3:
        return "".join(rng.choice("０１２３４５６７８９") for _ in range(rng.randint(1, 5)))
    return "".join(rng.choice("०१२३४५६७८९") for _ in range(rng.randint(1, 5)))


def emoji(rng):
    kind = rng.randrange(5)
    if kind == 0:
        return rng.choice(EMOJI_BASE)
    if kind == 1:
        return rng.choice(TONED) + rng.choice(SKIN_TONES)
    if kind == 2:
        return rng.choice(ZWJ_SEQUENCES)
    if kind == 3:
        return rng.choice(FLAGS)
    return "".join(rng.choice(EMOJI_BASE) for _ in range(rng.randint(2, 5)))


def combining_cluster(rng):
    base = rng.choice("aeiouAEIOUnNcCsSzZyY" + "αοиеאבक가")
    marks = "".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 3)))
    return base + marks


def decomposed(rng, text):
    """Some text in NFD (or with marks reordered), so that NFC has work to do."""
    form = rng.choice(["NFD", "NFD", "NFKD", "NFC"])
    return unicodedata.normalize(form, text)


def token(rng):
    r = rng.random()
    if r < 0.45:
        script = rng.choice(list(SCRIPTS))
        w = word(rng, script)
        if script.startswith("latin") and rng.random() < 0.3:
            w = decomposed(rng, w)
        return w
    if r < 0.50:
        return number(rng)
    if r < 0.56:
        return emoji(rng)
    if r < 0.61:
        return combining_cluster(rng)
    if r < 0.66:
        return "".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 3)))
    if r < 0.69:
        return rng.choice(SPECIAL_STRINGS)
    if r < 0.72:
        return word(rng, "latin") + rng.choice(CONTRACTIONS)
    if r < 0.77:
        return random_code_points(rng, rng.randint(1, 6))
    if r < 0.79:
        return rng.choice(CODE_SNIPPETS)
    return rng.choice(SPACES)


def document(rng):
    kind = rng.randrange(6)
    n = rng.randint(20, 400)
    if kind == 0:  # prose in one script with spaces and punctuation
        script = rng.choice(list(SCRIPTS))
        parts = []
        for _ in range(n):
            parts.append(word(rng, script))
            parts.append(rng.choice([" ", " ", " ", ", ", ". ", "\n", " "]))
        text = "".join(parts)
        return decomposed(rng, text) if rng.random() < 0.2 else text
    if kind == 1:  # code
        return "".join(rng.choice(CODE_SNIPPETS) for _ in range(rng.randint(2, 12)))
    if kind == 2:  # random assigned code points, with some whitespace
        return "".join(random_code_points(rng, rng.randint(1, 12)) + rng.choice(SPACES) for _ in range(n // 4))
    if kind == 3:  # whitespace-heavy
        return "".join(rng.choice(SPACES) * rng.randint(1, 4) + token(rng) for _ in range(n))
    # mixed
    sep = rng.choice(["", " ", " ", "  "])
    return sep.join(token(rng) for _ in range(n))


def corpus(seed=20240611, target_bytes=1 << 20):
    rng = random.Random(seed)
    docs = []
    total = 0
    while total < target_bytes:
        d = document(rng)
        docs.append(d)
        total += len(d.encode("utf-8"))
    return docs


if __name__ == "__main__":
    docs = corpus()
    text = "".join(docs)
    non_ascii = sum(1 for c in text if ord(c) > 127)
    print(f"{len(docs)} documents, {len(text.encode())} bytes, {len(text)} chars, "
          f"{100 * non_ascii / len(text):.1f}% non-ASCII chars", file=sys.stderr)
