import FuzzSupport
import Glibc
import SQLCipherKit

// A database with a 32-byte plaintext header (SQLCipher 4 only), opened after its first bytes were replaced by the
// input. SQLite reads the header's fields (page size, reserved bytes, page count, …) before anything is decrypted or
// authenticated, and the header is outside the encrypted, authenticated part of page 1: an overlay onto a valid file
// reaches the engine's header handling with every other page intact.
//
// Input: byte 0 selects the settings (see Fuzz.settings); the rest is written over a valid database made at start-up
// with those settings, from offset 0 (a longer input also replaces, then extends, the rest of the file).

/// The valid databases inputs are laid over, by selector (HMAC on, HMAC off).
nonisolated(unsafe) private var baseFiles: [[UInt8]] = []

/// Called once by libFuzzer's driver: refuses to run without SQLCipher 4; with FUZZ_MAKE_SEEDS=<folder>, writes the
/// seed inputs there and exits; otherwise makes the base databases.
@_cdecl("LLVMFuzzerInitialize")
public func initializePlaintextHeader(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    guard SQLCipher.supports(.plaintextHeader) else {
        Fuzz.printError(
            "PlaintextHeaderFuzzer needs SQLCipher 4 (linked: \(SQLCipher.version)); run it through .ci/sqlcipher4")
        exit(2)
    }
    Fuzz.makeSeedsIfAsked(base: Fuzz.plaintextHeader, prefix: "header", headerOnly: true)
    do {
        baseFiles = try [0, 1].map { try Fuzz.makeDatabase(settings: Fuzz.settings(selector: $0, base: Fuzz.plaintextHeader)) }
    } catch {
        Fuzz.printError("cannot make the base databases: \(error)")
        exit(1)
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPlaintextHeader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard size > 0, let data else { return 0 }
    if baseFiles.isEmpty { _ = initializePlaintextHeader(nil, nil) }  // when run through SwiftPM's main
    let selector = data[0] & 1
    var file = baseFiles[Int(selector)]
    let overlay = UnsafeBufferPointer(start: data + 1, count: size - 1)
    if overlay.count > file.count { file += [UInt8](repeating: 0, count: overlay.count - file.count) }
    file.replaceSubrange(0..<overlay.count, with: overlay)
    let settings = Fuzz.settings(selector: selector, base: Fuzz.plaintextHeader)
    file.withUnsafeBytes { Fuzz.openAndRead($0, settings: settings) }
    return 0
}
