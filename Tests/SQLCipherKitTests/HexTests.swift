import SQLCipherKit
import Testing

@Suite("Hex: the one hex text of non-secret bytes")
struct HexTests {
    @Test("bytes to lower-case text and back, either case accepted")
    func roundTrip() {
        let bytes: [UInt8] = [0x00, 0x0f, 0x3a, 0xa0, 0xff]
        #expect(Hex.string(bytes) == "000f3aa0ff")
        #expect(Hex.string([]) == "")
        #expect(Hex.bytes("000f3aa0ff") == bytes)
        #expect(Hex.bytes("000F3AA0FF") == bytes)
        #expect(Hex.bytes("") == [])
    }

    @Test("odd length and non-hex characters are refused, not skipped", arguments: ["0", "abc", "0g", " 00", "0x00", "+1"])
    func refused(text: String) {
        #expect(Hex.bytes(text) == nil)
    }
}
