import Foundation
import SQLCipherKit
import Testing
@testable import sqlcipherkit

@Suite("sqlcipherkit demo")
struct DemoCommandTests {
    @Test("runs every step and rotates with KeyRotation")
    func demo() throws {
        let scratch = try Scratch()
        let result = try runSubprocess(["demo"], in: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.standardOutput.contains("KeyRotation"))
        #expect(result.standardOutput.contains("every page verified"))
        #expect(result.standardOutput.contains("secret found in the file: no"))
        #expect(!result.standardOutput.contains("unexpected"))
    }
}
