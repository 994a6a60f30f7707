import FuzzSupport

Fuzz.runDriver { data, size in fuzzOpenDatabase(data, size) }
