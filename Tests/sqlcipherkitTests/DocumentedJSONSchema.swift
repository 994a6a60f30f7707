import Foundation
import Testing

/// The `--json` contract as Docs/CLI.md writes it, read from the document itself so that the tests and the document
/// cannot drift: the `result` of each subcommand (the table "`result` per subcommand") and the `error.kind`s each exit
/// status may have (the table "Exit status").
///
/// The table's notation: `{"key", "key": {…}, "key": [{…}], "key"|null, "key" (a comment)}`. A key followed by `|null`,
/// or whose comment lists `null`, may be `null`; every other key must be present and not `null`, and no key that is
/// not written there may appear. `[…]` is an array (of the object written inside, when there is one).
enum DocumentedJSONSchema {
    indirect enum Shape: Sendable {
        case object([String: Member])
        case array(Shape?)
        case scalar
    }

    struct Member: Sendable {
        let shape: Shape
        let isNullable: Bool
    }

    static let document: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("Docs/CLI.md"), encoding: .utf8)) ?? ""
    }()

    /// The `result` shape of each subcommand.
    static let results: [String: Shape] = {
        var shapes: [String: Shape] = [:]
        guard let start = document.range(of: "`result` per subcommand") else { return shapes }
        for line in document[start.upperBound...].split(separator: "\n").drop(while: { !$0.hasPrefix("|") })
            .prefix(while: { $0.hasPrefix("|") }) {
            let columns = line.split(separator: "|", omittingEmptySubsequences: false)
            guard columns.count >= 3, let open = line.range(of: "`{") else { continue }
            let names = columns[1].split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            let afterOpen = line[line.index(after: open.lowerBound)...]
            guard let close = afterOpen.firstIndex(of: "`") else { continue }
            let text = Array(String(afterOpen[..<close]).replacingOccurrences(of: "\\|", with: "|"))
            var parser = Parser(text: text)
            let shape = parser.value()
            for name in names where name != "Subcommand" { shapes[name] = shape }
        }
        return shapes
    }()

    /// The `error.kind`s of each exit status.
    static let kindsByStatus: [Int: Set<String>] = {
        var kinds: [Int: Set<String>] = [:]
        guard let start = document.range(of: "## Exit status") else { return kinds }
        for line in document[start.upperBound...].split(separator: "\n").drop(while: { !$0.hasPrefix("|") })
            .prefix(while: { $0.hasPrefix("|") }) {
            let columns = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard columns.count >= 4, let status = Int(columns[1]) else { continue }
            kinds[status] = Set(columns[3].split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }
                .map { String($0.element) })
        }
        return kinds
    }()

    /// What in `value` differs from `shape`, each with where it is (`result.databases[0].backupPath`).
    static func problems(_ value: Any, _ shape: Shape, at path: String) -> [String] {
        switch shape {
        case .scalar:
            // A value, or an object the document describes elsewhere (`"error"|null`: the error object).
            return []
        case .array(let element):
            guard let array = value as? [Any] else { return ["\(path) is not an array"] }
            guard let element else { return [] }
            return array.enumerated().flatMap { problems($0.element, element, at: "\(path)[\($0.offset)]") }
        case .object(let members):
            guard let object = value as? [String: Any] else { return ["\(path) is not an object"] }
            var found = Set(object.keys).subtracting(members.keys).sorted().map { "\(path).\($0) is not documented" }
            for (key, member) in members.sorted(by: { $0.key < $1.key }) {
                guard let child = object[key] else {
                    found.append("\(path).\(key) is missing")
                    continue
                }
                if child is NSNull {
                    if !member.isNullable { found.append("\(path).\(key) is null, not documented as |null") }
                    continue
                }
                found += problems(child, member.shape, at: "\(path).\(key)")
            }
            return found
        }
    }

    /// A reader of the table's notation.
    struct Parser {
        let text: [Character]
        var position = 0

        init(text: [Character]) { self.text = text }

        var current: Character? { position < text.count ? text[position] : nil }

        mutating func skipSpaces() { while current?.isWhitespace == true { position += 1 } }

        mutating func value() -> Shape {
            skipSpaces()
            switch current {
            case "{": return object()
            case "[":
                position += 1
                skipSpaces()
                let element: Shape? = current == "{" ? object() : nil
                skipPast(closing: "[", "]", depth: 1)
                return .array(element)
            default:
                while let character = current, !",}|(]".contains(character) { position += 1 }
                return .scalar
            }
        }

        mutating func object() -> Shape {
            position += 1  // {
            var members: [String: Member] = [:]
            while let character = current {
                if character == "}" { position += 1; break }
                guard character == "\"" else { position += 1; continue }
                position += 1
                var key = ""
                while let character = current, character != "\"" { key.append(character); position += 1 }
                position += 1
                skipSpaces()
                var shape = Shape.scalar
                if current == ":" {
                    position += 1
                    shape = value()
                }
                var isNullable = false
                while true {
                    skipSpaces()
                    if current == "(" {
                        let start = position
                        skipPast(closing: "(", ")", depth: 0)
                        if String(text[start..<position]).contains("null") { isNullable = true }
                    } else if String(text[position..<min(position + 5, text.count)]) == "|null" {
                        isNullable = true
                        position += 5
                    } else {
                        break
                    }
                }
                members[key] = Member(shape: shape, isNullable: isNullable)
            }
            return .object(members)
        }

        /// Moves past the bracket that closes the one opened `depth` levels up (`depth` 0: at the opening one).
        mutating func skipPast(closing open: Character, _ close: Character, depth: Int) {
            var depth = depth
            while let character = current {
                position += 1
                if character == open { depth += 1 }
                if character == close {
                    depth -= 1
                    if depth <= 0 { return }
                }
            }
        }
    }
}

@Suite("Docs/CLI.md's JSON schema, as the tests read it")
struct DocumentedJSONSchemaTests {
    @Test("the document gives a result schema for every subcommand and the kinds of every exit status")
    func documentParses() throws {
        let names = ["keygen", "rotate", "verify", "info", "encrypt", "decrypt", "backup", "migrate", "exec", "shell",
                     "demo", "replicate", "restore", "snapshots"]
        for name in names {
            #expect(DocumentedJSONSchema.results[name] != nil, "\(name)")
        }
        guard case .object(let rotate)? = DocumentedJSONSchema.results["rotate"],
              case .array(let element?)? = rotate["databases"]?.shape, case .object(let database) = element
        else {
            Issue.record("rotate's databases are not read as an array of objects")
            return
        }
        #expect(database["backupPath"]?.isNullable == true)
        #expect(database["keyState"]?.isNullable == false)
        #expect(database["path"]?.isNullable == false)
        #expect(Set(DocumentedJSONSchema.kindsByStatus.keys) == [0, 1, 2, 3, 4])
        #expect(DocumentedJSONSchema.kindsByStatus[3]?.contains("wrongKey") == true)
        #expect(DocumentedJSONSchema.kindsByStatus[1]?.contains("destinationExists") == true)
    }

    @Test("the checker finds a missing key, an undocumented one and a null that is not documented")
    func checkerFails() throws {
        guard let info = DocumentedJSONSchema.results["migrate"] else {
            Issue.record("no migrate schema")
            return
        }
        let good: [String: Any] = ["path": "a", "migrated": true, "durationSeconds": 1, "backupPath": NSNull()]
        #expect(DocumentedJSONSchema.problems(good, info, at: "result") == [])
        var missing = good
        missing["backupPath"] = nil
        #expect(DocumentedJSONSchema.problems(missing, info, at: "result") == ["result.backupPath is missing"])
        var extra = good
        extra["surprise"] = 1
        #expect(DocumentedJSONSchema.problems(extra, info, at: "result") == ["result.surprise is not documented"])
        var null = good
        null["path"] = NSNull()
        #expect(DocumentedJSONSchema.problems(null, info, at: "result")
            == ["result.path is null, not documented as |null"])
    }
}
