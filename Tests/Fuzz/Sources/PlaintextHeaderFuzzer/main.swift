import FuzzSupport

Fuzz.runDriver { data, size in fuzzPlaintextHeader(data, size) }
