import CSQLCipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The file names ATTACH (and VACUUM INTO) take: a URI file name can carry a key (`file:x.db?key=…`, `hexkey=`,
// `textkey=`), which SQLCipher then uses instead of the KEY clause or the main database's key; and a refused or failed
// ATTACH must not leave the empty file it created behind.

extension EncryptionGuard {
    /// Whether a file name, read as a URI, has a parameter that could carry a key.
    ///
    /// Wider than what the engine reads (exactly `key`, `hexkey` and `textkey` after percent-decoding, in a name that
    /// starts with `file:`, when URI file names are on): any case of `file:`, any parameter name that ends with `key`
    /// in any case, a name cut at an encoded NUL (SQLite ignores the rest of it), and text after `#` too. A name that
    /// is not a URI never carries a key: SQLite opens it as a plain path.
    static func hasURIKeyParameter(_ fileName: String) -> Bool {
        let bytes = Array(fileName.utf8)
        guard bytes.count > 5, String(decoding: bytes.prefix(5), as: UTF8.self).lowercased() == "file:",
              let query = bytes.firstIndex(of: UInt8(ascii: "?"))
        else { return false }
        let separators: Set<UInt8> = [UInt8(ascii: "&"), UInt8(ascii: "="), UInt8(ascii: "#")]
        for piece in bytes[(query + 1)...].split(whereSeparator: separators.contains) {
            let decoded = percentDecoded(piece)
            let name = decoded.prefix { $0 != 0 }
            if String(decoding: name, as: UTF8.self).lowercased().hasSuffix("key") { return true }
        }
        return false
    }

    /// Whether text (an engine's error message) holds a URI file name with a key parameter.
    static func mentionsURIKey(_ text: String) -> Bool {
        let bytes = Array(text.lowercased().utf8)
        let marker = Array("file:".utf8)
        return bytes.indices.contains { start in
            bytes[start...].starts(with: marker)
                && hasURIKeyParameter(String(decoding: bytes[start...], as: UTF8.self))
        }
    }

    /// Whether an attached schema was keyed from its URI file name: SQLite keeps the parameters it parsed with the
    /// file name, so the engine's own lookup answers for names given by a parameter or an expression, which the
    /// authorizer never sees.
    static func wasKeyedByURI(schema: String, handle: ConnectionHandle) -> Bool {
        guard let sqliteConnection = handle.sqliteConnection,
              let fileName = sqlite3_db_filename(sqliteConnection, schema) else { return false }
        return keyPragmas.contains { sqlite3_uri_parameter(fileName, $0) != nil }
    }

    /// The parameter an ATTACH statement takes its file name from, when the name is one parameter and nothing else
    /// (`ATTACH ? AS …`, `ATTACH DATABASE :path AS …`, `?2`, `@path`, `$path`); `nil` otherwise.
    static func attachFileParameter(of statement: OpaquePointer) -> CInt? {
        guard let text = sqlite3_sql(statement) else { return nil }
        return text.withMemoryRebound(to: UInt8.self, capacity: 1) { sql -> CInt? in
            var tokens = SQLTokens(sql)
            guard tokens.next()?.isKeyword("attach") == true else { return nil }
            var parameter = tokens.nextParameter()
            if parameter == nil, tokens.next()?.isKeyword("database") == true {
                parameter = tokens.nextParameter()
            }
            guard let parameter, tokens.next()?.isKeyword("as") == true else { return nil }
            // Nothing comes before the file name, so an anonymous `?` is the first parameter.
            let index = parameter == "?" ? 1 : sqlite3_bind_parameter_index(statement, parameter)
            return index > 0 ? index : nil
        }
    }

    static let uriKeyRefusal = GuardRefusal(
        "a key in a file name (a URI key, hexkey or textkey parameter) is refused: keys never travel in SQL. Give"
            + " the key as a bound parameter (ATTACH ? AS name KEY ?) or use Connection.attach(_:as:encryption:)",
        hidesSQL: true)

    /// `%HH` decoded, as SQLite decodes URI file names.
    static func percentDecoded(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var decoded: [UInt8] = []
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.endIndex,
               let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// The files an ATTACH about to run may create: SQLite creates the file before it checks the key (`KEY 0`: "Invalid
/// key value") or a URI's parameters (`file:x.db?key=` on SQLCipher 4), and a failed ATTACH leaves it, empty, with
/// the process's umask mode. Taken from the file names the authorizer saw compiled; a name given by a parameter or an
/// expression is not seen there, so nothing is known about it.
struct FilesAnAttachMayCreate {
    /// Every file name of the statement was seen.
    let knowsEveryName: Bool
    /// The paths the names may open that did not exist before the statement ran.
    private let missingPaths: [String]

    init(fileNames: [String?]) {
        knowsEveryName = !fileNames.contains(nil)
        missingPaths = fileNames.compactMap { $0 }.flatMap(Self.paths(openedBy:)).filter { path in
            var status = stat()
            return lstat(path, &status) != 0 && errno == ENOENT
        }
    }

    /// Removes what the statement created: a path that did not exist before and is now an empty regular file.
    func removeCreatedEmptyFiles() {
        for path in missingPaths {
            var status = stat()
            guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_size == 0 else { continue }
            unlink(path)
        }
    }

    /// The paths SQLite may open for a file name: the name itself (a plain path, or a `file:` name when URI file
    /// names are off) and, for a `file:` name, the path of the URI (after `//localhost`, up to `?` or `#`,
    /// percent-decoded, cut at an encoded NUL).
    static func paths(openedBy fileName: String) -> [String] {
        guard !fileName.isEmpty, fileName != ":memory:" else { return [] }
        var paths = [fileName]
        let bytes = Array(fileName.utf8)
        guard bytes.count > 5, String(decoding: bytes.prefix(5), as: UTF8.self).lowercased() == "file:" else {
            return paths
        }
        var rest = bytes[5...]
        if rest.starts(with: "//".utf8) {
            let authority = rest.dropFirst(2).prefix { $0 != UInt8(ascii: "/") }
            rest = rest.dropFirst(2 + authority.count)
        }
        let path = EncryptionGuard.percentDecoded(rest.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
            .prefix { $0 != 0 }
        if !path.isEmpty, String(decoding: path, as: UTF8.self) != ":memory:" {
            paths.append(String(decoding: path, as: UTF8.self))
        }
        return paths
    }
}
