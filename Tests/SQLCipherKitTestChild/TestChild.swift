import Foundation
import SQLCipherKitTestSupport

/// `sqlcipherkit-test-child ROLE ARGUMENTS…`: library code in a process of its own, for the tests that kill one
/// (see `TestChild` in SQLCipherKitTestSupport). Exits 0 when the role's work is done, 1 when it threw, 2 for a
/// wrong command line.
@main
struct TestChildProgram {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            switch arguments.first {
            case MigrationCrashScenario.role where arguments.count == 4:
                guard let mode = MigrationCrashScenario.Mode(rawValue: arguments[2]) else { usage() }
                try MigrationCrashScenario.runChild(database: arguments[1], mode: mode, readyPath: arguments[3])
            default:
                usage()
            }
        } catch {
            FileHandle.standardError.write(Data("\(TestChild.name): \(error)\n".utf8))
            exit(1)
        }
    }

    static func usage() -> Never {
        FileHandle.standardError.write(Data("""
            usage: \(TestChild.name) \(MigrationCrashScenario.role) DATABASE complete|hang READY_PATH
              (the key in \(TestChild.keyVariable)); run by the tests, not a test itself

            """.utf8))
        exit(2)
    }
}
