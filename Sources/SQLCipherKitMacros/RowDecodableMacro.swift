// The compiler plugin behind `@RowDecodable` (module SQLCipherKitRecordMacro). Built only with the package trait
// RecordMacro, which brings swift-syntax; without it this target is the empty program of Fallback.swift.
#if RecordMacro
import SwiftCompilerPlugin
import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@RowDecodable` on a struct: an extension that conforms it to `FetchableRecord` with an `init(row:)` reading each
/// stored property from the column of its name (or its `CodingKeys` raw value), as `Row.decode(_:)` would, without
/// the standard library's keyed container.
///
/// What it reads is what the synthesized `init(from:)` would decode:
/// - every stored instance property, but a `let` with an initial value (it cannot be assigned);
/// - with a `CodingKeys` enum, only the properties it lists, under its raw values;
/// - an optional property (`T?`, `Optional<T>`, `T!`) with `decodeColumnIfPresent` (a missing column or NULL is
///   `nil`), any other with `decodeColumn` (a missing column throws).
///
/// It refuses, with a diagnostic at the declaration: anything but a struct; a stored property without a type
/// annotation; a property wrapper; a `CodingKeys` that is not an enum of `String` raw values it can read.
public struct RowDecodableMacro: ExtensionMacro {
    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        guard let structDecl = declaration.as(StructDeclSyntax.self) else {
            throw DiagnosticsError(diagnostics: [
                Diagnostic(node: Syntax(node), message: RowDecodableDiagnostic.notAStruct)
            ])
        }
        let keys = try codingKeys(of: structDecl)
        var diagnostics: [Diagnostic] = []
        var assignments: [String] = []
        for member in structDecl.memberBlock.members {
            guard let variable = member.decl.as(VariableDeclSyntax.self) else { continue }
            if variable.modifiers.contains(where: { ["static", "class", "lazy"].contains($0.name.text) }) { continue }
            let isLet = variable.bindingSpecifier.tokenKind == .keyword(.let)
            for binding in variable.bindings {
                guard let pattern = binding.pattern.as(IdentifierPatternSyntax.self) else { continue }
                if let accessors = binding.accessorBlock, isComputed(accessors) { continue }
                if isLet && binding.initializer != nil { continue }
                let name = pattern.identifier.text
                let column: String
                if let keys {
                    guard let key = keys[unescaped(name)] else { continue }
                    column = key
                } else {
                    column = unescaped(name)
                }
                if !variable.attributes.isEmpty {
                    diagnostics.append(Diagnostic(
                        node: Syntax(variable), message: RowDecodableDiagnostic.attribute(unescaped(name))))
                    continue
                }
                guard let annotation = binding.typeAnnotation?.type ?? laterAnnotation(after: binding, in: variable)
                else {
                    diagnostics.append(Diagnostic(
                        node: Syntax(binding), message: RowDecodableDiagnostic.noType(unescaped(name))))
                    continue
                }
                let literal = StringLiteralExprSyntax(content: column).description
                if let wrapped = optionalWrapped(annotation) {
                    assignments.append(
                        "self.\(name) = try row.decodeColumnIfPresent((\(wrapped.trimmedDescription)).self, named: \(literal))")
                } else {
                    assignments.append(
                        "self.\(name) = try row.decodeColumn((\(annotation.trimmedDescription)).self, named: \(literal))")
                }
            }
        }
        if !diagnostics.isEmpty { throw DiagnosticsError(diagnostics: diagnostics) }
        let access = structDecl.modifiers.first(where: { ["public", "package"].contains($0.name.text) })
            .map { "\($0.name.text) " } ?? ""
        let body = assignments.map { "        " + $0 }.joined(separator: "\n")
        let source: DeclSyntax = """
            extension \(type.trimmed): SQLCipherKit.FetchableRecord {
                \(raw: access)init(row: SQLCipherKit.Row) throws {
            \(raw: body)
                }
            }
            """
        guard let extensionDecl = source.as(ExtensionDeclSyntax.self) else { return [] }
        return [extensionDecl]
    }

    /// The column of each property named in a `CodingKeys` enum, or `nil` when the struct declares none.
    private static func codingKeys(of structDecl: StructDeclSyntax) throws -> [String: String]? {
        for member in structDecl.memberBlock.members {
            guard let decl = member.decl.as(EnumDeclSyntax.self), decl.name.text == "CodingKeys" else { continue }
            var keys: [String: String] = [:]
            for enumMember in decl.memberBlock.members {
                guard let caseDecl = enumMember.decl.as(EnumCaseDeclSyntax.self) else { continue }
                for element in caseDecl.elements {
                    let name = unescaped(element.name.text)
                    if let rawValue = element.rawValue {
                        guard let literal = rawValue.value.as(StringLiteralExprSyntax.self),
                              let text = plainText(of: literal)
                        else {
                            throw DiagnosticsError(diagnostics: [
                                Diagnostic(node: Syntax(rawValue), message: RowDecodableDiagnostic.codingKeyValue(name))
                            ])
                        }
                        keys[name] = text
                    } else {
                        keys[name] = name
                    }
                }
            }
            return keys
        }
        return nil
    }

    /// The text of a string literal without interpolation, or `nil`.
    private static func plainText(of literal: StringLiteralExprSyntax) -> String? {
        var text = ""
        for segment in literal.segments {
            guard let piece = segment.as(StringSegmentSyntax.self) else { return nil }
            text += piece.content.text
        }
        // Escapes would need decoding; a column name with a backslash is not worth the risk of a wrong name.
        return text.contains("\\") ? nil : text
    }

    /// `true` for a getter (`{ … }`, `get`, `_read`…); `false` for observers only (`willSet`, `didSet`).
    private static func isComputed(_ accessors: AccessorBlockSyntax) -> Bool {
        switch accessors.accessors {
        case .getter:
            return true
        case .accessors(let list):
            return list.contains { !["willSet", "didSet"].contains($0.accessorSpecifier.text) }
        }
    }

    /// In `var a, b: Int`, `a`'s type is the next annotation.
    private static func laterAnnotation(after binding: PatternBindingSyntax, in variable: VariableDeclSyntax)
        -> TypeSyntax?
    {
        var seen = false
        for other in variable.bindings {
            if other.id == binding.id {
                seen = true
                continue
            }
            if seen, let type = other.typeAnnotation?.type { return type }
            if seen, other.initializer != nil { return nil }
        }
        return nil
    }

    /// `T` for `T?`, `T!` and `Optional<T>`; `nil` for any other type.
    private static func optionalWrapped(_ type: TypeSyntax) -> TypeSyntax? {
        if let optional = type.as(OptionalTypeSyntax.self) { return optional.wrappedType }
        if let implicit = type.as(ImplicitlyUnwrappedOptionalTypeSyntax.self) { return implicit.wrappedType }
        if let identifier = type.as(IdentifierTypeSyntax.self), identifier.name.text == "Optional",
           let arguments = identifier.genericArgumentClause?.arguments, arguments.count == 1,
           let wrapped = typeArgument(arguments.first!)
        {
            return wrapped
        }
        if let member = type.as(MemberTypeSyntax.self), member.name.text == "Optional",
           member.baseType.trimmedDescription == "Swift",
           let arguments = member.genericArgumentClause?.arguments, arguments.count == 1,
           let wrapped = typeArgument(arguments.first!)
        {
            return wrapped
        }
        return nil
    }

    /// The type a generic argument names, `nil` for a value (`Vector<3, Int>`'s `3`). swift-syntax 601 made an
    /// argument a type or an expression; 600 (the lowest the package accepts) has types only.
    private static func typeArgument(_ argument: GenericArgumentSyntax) -> TypeSyntax? {
        #if canImport(SwiftSyntax601)
        if case .type(let type) = argument.argument { return type }
        return nil
        #else
        return argument.argument
        #endif
    }

    /// A name without its backticks (`` `default` `` is the column `default`).
    private static func unescaped(_ name: String) -> String {
        name.hasPrefix("`") && name.hasSuffix("`") && name.count >= 2 ? String(name.dropFirst().dropLast()) : name
    }
}

enum RowDecodableDiagnostic: DiagnosticMessage {
    case notAStruct
    case noType(String)
    case attribute(String)
    case codingKeyValue(String)

    var message: String {
        switch self {
        case .notAStruct:
            "@RowDecodable applies to a struct (a class's init(row:) would have to be required; write it by hand)"
        case .noType(let name):
            "@RowDecodable needs the type of '\(name)' written out (': Type'); it reads the column as that type"
        case .attribute(let name):
            "@RowDecodable cannot read '\(name)': a property wrapper or attribute changes what is stored; write"
                + " init(row:) by hand, or leave the property out of CodingKeys and give it a default"
        case .codingKeyValue(let name):
            "@RowDecodable reads CodingKeys raw values that are plain string literals; '\(name)' has another"
        }
    }

    var diagnosticID: MessageID {
        let id = switch self {
        case .notAStruct: "notAStruct"
        case .noType: "noType"
        case .attribute: "attribute"
        case .codingKeyValue: "codingKeyValue"
        }
        return MessageID(domain: "SQLCipherKitMacros", id: id)
    }

    var severity: DiagnosticSeverity { .error }
}

@main
struct SQLCipherKitMacrosPlugin: CompilerPlugin {
    let providingMacros: [Macro.Type] = [RowDecodableMacro.self]
}
#endif
