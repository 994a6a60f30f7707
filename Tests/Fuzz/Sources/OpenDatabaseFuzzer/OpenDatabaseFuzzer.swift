import FuzzSupport
import Glibc
import SQLCipherKit

// Arbitrary bytes opened as a database with a key, with the engine's default cipher settings. The first input byte
// selects the settings (see Fuzz.settings); the rest is the file.

/// Called once by libFuzzer's driver: with FUZZ_MAKE_SEEDS=<folder>, writes the seed databases there and exits.
@_cdecl("LLVMFuzzerInitialize")
public func initializeOpenDatabase(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    Fuzz.makeSeedsIfAsked(base: .engineDefault, prefix: "db")
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOpenDatabase(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard size > 0, let data else { return 0 }
    let settings = Fuzz.settings(selector: data[0], base: .engineDefault)
    Fuzz.openAndRead(UnsafeRawBufferPointer(start: data + 1, count: size - 1), settings: settings)
    return 0
}
