import FuzzSupport
import Glibc
import SQLCipherKit

// Key-file text parsing: every way a key text reaches EncryptionKey must agree, never show the content in an
// error, and a parsed key must survive a round trip through a key file.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeyText(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)

    // 1. The buffer initialiser (the one the others use).
    let parsed: Result<EncryptionKey, any Error> = Result { try EncryptionKey(keyText: bytes, source: "fuzz input") }

    // 2. The byte-sequence initialiser must agree.
    let fromArray = Result { try EncryptionKey(keyText: Array(bytes)) }
    requireSameOutcome(parsed, fromArray, "keyText: [UInt8]")

    // 3. The String initialiser must agree for valid UTF-8 text.
    if let text = String(validating: bytes, as: UTF8.self) {
        requireSameOutcome(parsed, Result { try EncryptionKey(keyText: text) }, "keyText: String")
    }

    // 4. Reading a descriptor (a pipe) must agree; inputs over the size limit must be refused.
    if size < 60_000 {
        let fromPipe = readThroughPipe(bytes)
        if size > EncryptionKey.maximumKeyFileByteCount {
            guard case .failure = fromPipe else { fatalError("an over-long key text was accepted from a pipe") }
        } else {
            requireSameOutcome(parsed, fromPipe, "readingFileDescriptor")
        }
    }

    switch parsed {
    case .success(let key):
        checkInvariants(of: key)
        checkKeyFileRoundTrip(of: key)
    case .failure(let error):
        requireNoContent(of: bytes, in: "\(error)")
    }
    return 0
}

private func requireSameOutcome(
    _ expected: Result<EncryptionKey, any Error>, _ actual: Result<EncryptionKey, any Error>, _ path: String
) {
    switch (expected, actual) {
    case (.success(let a), .success(let b)):
        guard a.isSameKey(as: b) else { fatalError("\(path) parsed another key than keyText(_:source:)") }
    case (.failure, .failure):
        break
    default:
        fatalError("\(path) and keyText(_:source:) disagree on whether the text is a key")
    }
}

private func checkInvariants(of key: EncryptionKey) {
    switch key.kind {
    case .passphrase, .raw:
        guard key.salt == nil else { fatalError("a \(key.kind) key carries a salt") }
    case .rawWithSalt:
        guard key.salt?.count == EncryptionKey.saltByteCount else { fatalError("a salt that is not 16 bytes") }
    }
    guard key.description.contains("redacted"), key.debugDescription == key.description else {
        fatalError("a key description that is not redacted")
    }
}

/// A key written with write(toKeyFile:) must read back as the same key, or the write must refuse.
private func checkKeyFileRoundTrip(of key: EncryptionKey) {
    let path = Fuzz.scratchDirectory + "/round-trip.key"
    unlink(path)
    defer { unlink(path) }
    do {
        try key.write(toKeyFile: path)
    } catch {
        return  // refusing to write a key that would not read back is allowed
    }
    guard let reread = try? EncryptionKey(contentsOf: path) else {
        fatalError("a key written by write(toKeyFile:) does not read back")
    }
    guard reread.isSameKey(as: key) else {
        fatalError("a key written by write(toKeyFile:) reads back as another key (kind \(reread.kind))")
    }
}

private func readThroughPipe(_ bytes: UnsafeRawBufferPointer) -> Result<EncryptionKey, any Error> {
    var descriptors: [CInt] = [0, 0]
    guard pipe(&descriptors) == 0 else { fatalError("pipe failed") }
    // A pipe holds 64 KiB, more than the inputs given here, so writing first cannot block.
    var offset = 0
    while offset < bytes.count {
        let written = write(descriptors[1], bytes.baseAddress! + offset, bytes.count - offset)
        guard written > 0 else { fatalError("pipe write failed") }
        offset += written
    }
    close(descriptors[1])
    defer { close(descriptors[0]) }
    return Result { try EncryptionKey(readingFileDescriptor: descriptors[0], source: "fuzz pipe") }
}

/// An error must not contain the key text: no run of 8 or more hex digits of the input (the shape of key material)
/// may appear in it. The library's own messages have no such run.
private func requireNoContent(of bytes: UnsafeRawBufferPointer, in message: String) {
    let messageBytes = Array(message.utf8)
    var runStart = 0
    for index in 0...bytes.count {
        if index < bytes.count && isHexDigit(bytes[index]) { continue }
        if index - runStart >= 8 {
            let run = Array(bytes[runStart..<index])
            if contains(messageBytes, run) { fatalError("an error message shows part of the key text") }
        }
        runStart = index + 1
    }
}

private func isHexDigit(_ byte: UInt8) -> Bool {
    (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x66)
}

private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= haystack.count else { return false }
    for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
        return true
    }
    return false
}
