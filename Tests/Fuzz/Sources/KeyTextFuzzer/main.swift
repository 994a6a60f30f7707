import FuzzSupport

Fuzz.runDriver { data, size in fuzzKeyText(data, size) }
