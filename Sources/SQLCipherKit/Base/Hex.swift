/// Hexadecimal text of bytes that are not secret (salts, masks, BLOBs shown by the command-line tool), and back.
///
/// Key material goes only through ``write(_:into:at:)`` and ``value(_:)``, which touch no `String` or `Array`: the
/// key's hex text lives in wiped buffers (`EncryptionKey`), where a `String` would leave copies behind.
package enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// Writes `bytes` as lower-case hex into a buffer (a key's wiped one), advancing `position`.
    static func write(_ bytes: some Sequence<UInt8>, into out: UnsafeMutableRawBufferPointer, at position: inout Int) {
        for byte in bytes {
            out[position] = digits[Int(byte >> 4)]
            out[position + 1] = digits[Int(byte & 0x0F)]
            position += 2
        }
    }

    /// Two lower-case digits per byte, no separator.
    package static func string(_ bytes: some Sequence<UInt8>) -> String {
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of an even number of hex digits (either case); `nil` for anything else.
    package static func bytes(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard characters.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(characters.count / 2)
        for index in stride(from: 0, to: characters.count, by: 2) {
            guard let high = value(characters[index]), let low = value(characters[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// The value of one hex digit, either case; `nil` for any other character.
    static func value(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
